"""End training episodes on life loss without resetting the game."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

Flag = TypeVar("Flag", bool, np.ndarray)


def life_loss_step(lives: Any, previous_lives: Any, terminated: Flag, truncated: Flag) -> tuple[Flag, Flag]:
    """The episodic-life rule for one step: ``(terminated for training, continue the game on reset)``.

    A life is lost when the lives counter drops and is still above zero (at zero the game itself ends).
    The training episode ends on a real end or a life loss; the next reset continues the game only after
    a life loss that did not also end the game. Works on scalars (one env) and on numpy arrays (all envs
    of the native vector backend at once).
    """
    lost = (lives > 0) & (lives < previous_lives)
    return terminated | lost, lost & np.logical_not(terminated | truncated)


def continue_or_reset(
    continue_game: bool,
    seed: int | None,
    step_noop: Callable[[], tuple[Any, Any, bool, bool, dict]],
    reset: Callable[[], tuple[Any, dict]],
) -> tuple[Any, dict]:
    """The episodic-life reset: after a life loss (and without a new seed) take one NOOP step instead of
    resetting, unless that step ends the game; otherwise ``reset()``. Returns ``(obs, info)``."""
    if continue_game and seed is None:
        obs, _, terminated, truncated, info = step_noop()
        if not (terminated or truncated):
            return obs, info
    return reset()


class EpisodicLife(gym.Wrapper):
    """A life loss ends the *training* episode (``terminated=True``) but not the game.

    After an episode that this wrapper ended because of a life loss, ``reset()`` continues the running
    game with one NOOP step instead of resetting the emulator. Any other reset (first reset, after a real
    game over or a truncation, or a reset called mid-episode) resets the game. ``info["lives"]`` is kept
    from ALE. Helps value estimation (Mnih et al. 2015); the true game score is recorded below this
    wrapper by :class:`TrueScoreStatistics`. The rules are :func:`life_loss_step` and
    :func:`continue_or_reset`, shared with the native vector backend.
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
        terminated, continue_game = life_loss_step(lives, self._lives, terminated, truncated)
        self._lives = lives
        self._continue_game = bool(continue_game)
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        continue_game, self._continue_game = self._continue_game, False
        obs, info = continue_or_reset(
            continue_game,
            seed,
            lambda: self.env.step(self.noop_action),
            lambda: self.env.reset(seed=seed, options=options),
        )
        self._lives = self._ale_lives()
        return obs, info
