"""rl-zoo3 hyperparameters for PPO on every RetroKit ID (the zoo's Atari settings, without its wrappers).

``--conf-file retro_atari_kit.integrations.zoo.ppo``;
the numbers: ``retro_atari_kit/presets/ppo.yaml`` (``zoo``).
"""

from retro_atari_kit.integrations.zoo import hyperparams_for_all

hyperparams = hyperparams_for_all("ppo")
