"""Stack the last k frames along the channel axis."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

# The kit's one default for frames per observation (DeepMind's 4): envs, vector envs and engines read it.
DEFAULT_FRAME_STACK = 4


class FrameStack(gym.Wrapper):
    """Stack the last ``k`` channel-first frames: ``(C, H, W)`` in, ``(k*C, H, W)`` uint8 out.

    The oldest frame comes first. On reset the first frame is repeated ``k`` times (as baselines and
    SB3's ``VecFrameStack`` after reset would show once filled). Each call returns a fresh array, so
    stored observations are never mutated later.
    """

    def __init__(self, env: gym.Env, k: int = DEFAULT_FRAME_STACK):
        super().__init__(env)
        if k < 1:
            raise ValueError(f"frame_stack must be >= 1, got {k}")
        channels, height, width = env.observation_space.shape
        self.k = k
        self.channels = channels
        self._stack = np.zeros((k * channels, height, width), dtype=np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, self._stack.shape, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._stack[:] = np.tile(obs, (self.k, 1, 1))
        return self._stack.copy(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._stack[: -self.channels] = self._stack[self.channels :]
        self._stack[-self.channels :] = obs
        return self._stack.copy(), reward, terminated, truncated, info
