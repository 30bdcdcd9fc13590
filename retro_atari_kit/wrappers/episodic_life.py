"""End training episodes on life loss without resetting the game."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class EpisodicLife(gym.Wrapper):
    """A life loss ends the *training* episode (``terminated=True``) but not the game.

    After an episode that this wrapper ended because of a life loss, ``reset()`` continues the running
    game with one NOOP step instead of resetting the emulator. Any other reset (first reset, after a real
    game over or a truncation, or a reset called mid-episode) resets the game. ``info["lives"]`` is kept
    from ALE. Helps value estimation (Mnih et al. 2015); the true game score is recorded below this
    wrapper by :class:`TrueScoreStatistics`.
    """

    def __init__(self, env: gym.Env, noop_action: int = 0):
        super().__init__(env)
        self.noop_action = noop_action
        self._lives = 0
        self._continue_game = False

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self._ale_lives()
        game_over = terminated or truncated
        lost_life = 0 < lives < self._lives
        self._lives = lives
        self._continue_game = lost_life and not game_over
        return obs, reward, terminated or lost_life, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._continue_game and seed is None:
            self._continue_game = False
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if not (terminated or truncated):
                self._lives = self._ale_lives()
                return obs, info
        self._continue_game = False
        obs, info = self.env.reset(seed=seed, options=options)
        self._lives = self._ale_lives()
        return obs, info
