"""One small wrapper per behaviour; each docstring states its semantics."""

from retro_atari_kit.wrappers.clip_reward import ClipReward
from retro_atari_kit.wrappers.discrete_actions import ACTION_SETS, DiscreteActions
from retro_atari_kit.wrappers.episodic_life import EpisodicLife
from retro_atari_kit.wrappers.fire_reset import FireReset
from retro_atari_kit.wrappers.frame_stack import FrameStack
from retro_atari_kit.wrappers.max_and_skip import MaxAndSkip
from retro_atari_kit.wrappers.noop_reset import NoopReset
from retro_atari_kit.wrappers.stochastic_frame_skip import StochasticFrameSkip
from retro_atari_kit.wrappers.true_score import TrueScoreStatistics
from retro_atari_kit.wrappers.warp_frame import WarpFrame

__all__ = [
    "ACTION_SETS",
    "ClipReward",
    "DiscreteActions",
    "EpisodicLife",
    "FireReset",
    "FrameStack",
    "MaxAndSkip",
    "NoopReset",
    "StochasticFrameSkip",
    "TrueScoreStatistics",
    "WarpFrame",
]
