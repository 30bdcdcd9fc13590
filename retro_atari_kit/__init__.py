"""retro-atari-kit: correct, fast, uint8 Atari and retro-console environments for RL.

``import retro_atari_kit`` registers the ``RetroKit/`` namespace with gymnasium::

    import gymnasium as gym
    import retro_atari_kit

    env = gym.make("RetroKit/Pong-v0")   # DeepMind stack, uint8 (4, 84, 84)

It also makes the episode recorders users wrap around a kit env report its true game scores
(:mod:`retro_atari_kit.recorders`): gymnasium's at once, a framework's (SB3's ``Monitor``) through its
integration as soon as that framework is loaded (:mod:`retro_atari_kit.adapters`: the guard, and the
opt-out ``RETROKIT_ADAPTERS=0`` / :func:`disable_adapters`).
"""

import retro_atari_kit._early_interrupt as _early_interrupt  # noqa: F401 - first: Ctrl-C while `retrokit` starts
from retro_atari_kit import adapters as _adapters
from retro_atari_kit.adapters import adapters_enabled, disable_adapters, enable_adapters
from retro_atari_kit.recorders import ADAPTERS as _GYMNASIUM_ADAPTERS
from retro_atari_kit.registration import register_all

__version__ = "0.1.0"

register_all()
_adapters.install(_GYMNASIUM_ADAPTERS)

__all__ = ["__version__", "adapters_enabled", "disable_adapters", "enable_adapters", "register_all"]
