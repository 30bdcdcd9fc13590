"""Torch models for Atari-style frames: uint8 in, normalised once, on the device (no SB3 import here).

``NatureCNN`` and ``ImpalaCNN`` accept ``(B, C, H, W)`` uint8 frames (divided by 255 once, inside the
module) or float frames already in [0, 1] (used as is). The SB3 adapters live in
``retro_atari_kit.integrations.sb3.extractors``.
"""

from retro_atari_kit.models.impala import ImpalaCNN, ImpalaStage, ResidualBlock
from retro_atari_kit.models.nature import NatureCNN

__all__ = ["ImpalaCNN", "ImpalaStage", "NatureCNN", "ResidualBlock"]
