"""retro-atari-kit: correct, fast, uint8 Atari and retro-console environments for RL.

``import retro_atari_kit`` registers the ``RetroKit/`` namespace with gymnasium::

    import gymnasium as gym
    import retro_atari_kit

    env = gym.make("RetroKit/Pong-v0")   # DeepMind stack, uint8 (4, 84, 84)
"""

from retro_atari_kit.registration import register_all

__version__ = "0.1.0"

register_all()

__all__ = ["__version__", "register_all"]
