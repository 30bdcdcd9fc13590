"""No-op starts."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class NoopReset(gym.Wrapper):
    """On reset, take a random number of NOOP actions in ``1..noop_max``.

    The count is drawn from the *unwrapped* env's ``np_random``, so ``reset(seed=s)`` fixes it. This
    diversifies start states of deterministic games (Mnih et al. 2015). If the game ends during the
    no-ops (it practically never does) the env is reset again. ``noop_max=0`` disables the wrapper.
    Rewards of the no-op frames are zero in every ALE game and are dropped.
    """

    def __init__(self, env: gym.Env, noop_max: int = 30, noop_action: int = 0):
        super().__init__(env)
        if noop_max < 0:
            raise ValueError(f"noop_max must be >= 0, got {noop_max}")
        self.noop_max = noop_max
        self.noop_action = noop_action
        self.last_noop_count = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if self.noop_max == 0:
            self.last_noop_count = 0
            return obs, info
        count = int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1))
        self.last_noop_count = count
        for _ in range(count):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        return obs, info
