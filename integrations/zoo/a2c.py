"""rl-zoo3 hyperparameters for A2C on every RetroKit ID (the zoo's Atari settings, without its wrappers).

``--conf-file retro_atari_kit.integrations.zoo.a2c``; RMSprop with TF-like epsilon as in the A2C paper.
"""

from retro_atari_kit.integrations.zoo import hyperparams_for_all
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

A2C_ATARI = {
    "policy": "CnnPolicy",
    "n_envs": 16,
    "n_timesteps": 10_000_000,
    "ent_coef": 0.01,
    "vf_coef": 0.25,
    "policy_kwargs": {"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}},
}

hyperparams = hyperparams_for_all(A2C_ATARI)
