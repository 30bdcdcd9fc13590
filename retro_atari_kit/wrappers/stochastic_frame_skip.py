"""Action repeat with a sticky first sub-step (baselines' retro frame skip semantics)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class StochasticFrameSkip(gym.Wrapper):
    """Repeat each action for ``skip`` emulator frames; the first frame may still use the previous action.

    On every step after the first one since ``reset``, with probability ``sticky_prob`` the first sub-step
    repeats the previously applied action (the new action is "late" by one frame); sub-steps 2..``skip``
    always apply the new action. The first action after a reset applies at once. Rewards of the sub-steps
    are summed; the repeat stops early when the episode ends; the observation and info are those of the
    last frame produced (no max-pooling: console games do not flicker like the Atari 2600).

    The random draws come from a generator seeded by ``reset(seed=...)`` (one draw per step, only when a
    previous action exists), so the same seed and actions give the same frames. ``sticky_prob=0`` is plain
    repetition.
    """

    def __init__(self, env: gym.Env, skip: int = 4, sticky_prob: float = 0.25):
        super().__init__(env)
        if skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {skip}")
        if not 0.0 <= sticky_prob <= 1.0:
            raise ValueError(f"sticky_actions must be a probability in [0, 1], got {sticky_prob}")
        self.skip = skip
        self.sticky_prob = float(sticky_prob)
        self._rng = np.random.default_rng()
        self._current: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._current = None
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        total_reward = 0.0
        terminated = truncated = False
        obs, info = None, {}
        for i in range(self.skip):
            if self._current is None or i > 0:
                self._current = action
            elif self._rng.random() >= self.sticky_prob:
                self._current = action
            obs, reward, terminated, truncated, info = self.env.step(self._current)
            total_reward += float(reward)
            if terminated or truncated:
                break
        return obs, total_reward, terminated, truncated, info
