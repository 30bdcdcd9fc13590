"""``python -m retro_atari_kit.integrations.sb3.presets`` prints every preset as YAML."""

from retro_atari_kit.integrations.sb3.presets import _main

_main()
