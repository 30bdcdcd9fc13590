"""Clip rewards to their sign."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ClipReward(gym.RewardWrapper):
    """Replace each reward by its sign (-1, 0 or +1), as in the DeepMind Atari setup.

    Keeps one learning rate usable across games whose scores differ by orders of magnitude. The true
    (unclipped) score is recorded below this wrapper by :class:`TrueScoreStatistics`.
    """

    def reward(self, reward: float) -> float:
        return float(np.sign(reward))
