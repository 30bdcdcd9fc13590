"""rl-zoo3 hyperparameters for A2C on every RetroKit ID (the zoo's Atari settings, without its wrappers).

``--conf-file retro_atari_kit.integrations.zoo.a2c``;
the numbers: ``retro_atari_kit/presets/a2c.yaml`` (``zoo``).
"""

from retro_atari_kit.integrations.zoo import hyperparams_for_all

hyperparams = hyperparams_for_all("a2c")
