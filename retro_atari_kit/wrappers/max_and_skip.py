"""Action repeat with max-pooling of the last two frames."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class MaxAndSkip(gym.Wrapper):
    """Repeat each action ``skip`` times, sum the rewards, return the pixel-wise max of the last two frames.

    Atari sprites flicker (drawn on alternate frames); the max over the two most recent emulator frames
    shows them all. The repeat stops early when the episode ends; the observation is then the max of the
    last two frames the emulator actually produced (the previous step's final frame if only one frame of
    this step was produced). ``skip=1`` returns the frame itself.
    """

    def __init__(self, env: gym.Env, skip: int = 4):
        super().__init__(env)
        if skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {skip}")
        self.skip = skip
        shape = env.observation_space.shape
        self._frames = np.zeros((2, *shape), dtype=env.observation_space.dtype)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._frames[0] = obs
        self._frames[1] = obs
        return obs, info

    def step(self, action):
        total_reward = 0.0
        terminated = truncated = False
        info: dict = {}
        for _ in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self._frames[0] = self._frames[1]
            self._frames[1] = obs
            total_reward += float(reward)
            if terminated or truncated:
                break
        if self.skip == 1:
            return self._frames[1].copy(), total_reward, terminated, truncated, info
        return self._frames.max(axis=0), total_reward, terminated, truncated, info
