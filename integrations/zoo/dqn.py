"""rl-zoo3 hyperparameters for DQN on every RetroKit ID (the zoo's Atari settings, without its wrappers).

``--conf-file retro_atari_kit.integrations.zoo.dqn``;
the numbers: ``retro_atari_kit/presets/dqn.yaml`` (``zoo``).
"""

from retro_atari_kit.integrations.zoo import hyperparams_for_all

hyperparams = hyperparams_for_all("dqn")
