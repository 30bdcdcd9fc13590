"""Clip rewards to their sign."""

from __future__ import annotations

from typing import TypeVar

import gymnasium as gym
import numpy as np

Reward = TypeVar("Reward", float, np.ndarray)


def clip_to_sign(reward: Reward) -> Reward:
    """The reward-clip rule: -1, 0 or +1 (a float for a scalar, float64 for an array of rewards)."""
    if isinstance(reward, np.ndarray):
        return np.sign(reward, dtype=np.float64)
    return float(np.sign(reward))


class ClipReward(gym.RewardWrapper):
    """Replace each reward by its sign (-1, 0 or +1), as in the DeepMind Atari setup.

    Keeps one learning rate usable across games whose scores differ by orders of magnitude. The true
    (unclipped) score is recorded below this wrapper by :class:`TrueScoreStatistics`. The rule is
    :func:`clip_to_sign`, shared with the native vector backend.
    """

    def reward(self, reward: float) -> float:
        return clip_to_sign(reward)
