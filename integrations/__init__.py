"""Adapters for RL frameworks, installed as ``retro_atari_kit.integrations``.

Each sub-package depends on the core only, never on another integration.
"""
