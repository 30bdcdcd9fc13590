"""rl-zoo3 hyperparameters for PPO on every RetroKit ID (the zoo's Atari settings, without its wrappers).

``--conf-file retro_atari_kit.integrations.zoo.ppo``; Nature CNN (SB3's ``CnnPolicy``; images are uint8
and normalised once by the policy).
"""

from retro_atari_kit.integrations.zoo import hyperparams_for_all

PPO_ATARI = {
    "policy": "CnnPolicy",
    "n_envs": 8,
    "n_timesteps": 10_000_000,
    "n_steps": 128,
    "n_epochs": 4,
    "batch_size": 256,
    "learning_rate": "lin_2.5e-4",
    "clip_range": "lin_0.1",
    "vf_coef": 0.5,
    "ent_coef": 0.01,
}

hyperparams = hyperparams_for_all(PPO_ATARI)
