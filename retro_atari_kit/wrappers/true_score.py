"""True game score statistics, recorded before life-loss episodes and reward clipping."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym


def episode_record(score: float, length: int, start: float) -> dict[str, float | int]:
    """``info["episode"]`` for a game that ends now: true score, agent steps, seconds since ``start``
    (a ``time.perf_counter()`` value). Shared with the native vector backend."""
    return {"r": score, "l": length, "t": round(time.perf_counter() - start, 6)}


class TrueScoreStatistics(gym.Wrapper):
    """Report the true game score in ``info["episode"]`` when the real game ends.

    Sits below the wrappers that cut episodes at life losses or clip rewards, and above frame skipping,
    so every ``step`` here is one agent step. When a step ends the game (``terminated`` or ``truncated``
    at this level: game over, ALE's frame cap or the stack's own time limit) its info gets
    ``info["episode"] = {"r": sum of unclipped rewards over all lives, "l": agent steps, "t": seconds}``,
    the keys SB3's ``Monitor`` uses, so SB3 logs true scores. Steps taken by wrappers above (FIRE on
    reset, the NOOP that continues a game after a life loss) count as agent steps and their rewards count
    towards the score.

    Recorders wrapped around a kit env (gymnasium's ``RecordEpisodeStatistics``, SB3's ``Monitor``) find
    ``reports_true_scores`` on the stack and pass this record on instead of writing their own (see
    :mod:`retro_atari_kit.recorders`).
    """

    #: read through ``get_wrapper_attr`` by recorders above the stack (:func:`reports_true_scores`)
    reports_true_scores = True

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.score = 0.0
        self.length = 0
        self._start = time.perf_counter()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.score = 0.0
        self.length = 0
        self._start = time.perf_counter()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.length += 1
        if terminated or truncated:
            info = dict(info)
            info["episode"] = episode_record(self.score, self.length, self._start)
        return obs, reward, terminated, truncated, info


def reports_true_scores(env: gym.Env) -> bool:
    """Whether ``env`` (a kit stack, possibly wrapped further) writes the kit's true-score record to
    ``info["episode"]`` at every real game end (and never at a life loss)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, TrueScoreStatistics):
            return True
        env = env.env
    # a stable-retro stack hosted in a worker process (its wrappers live there)
    return bool(getattr(type(env), "reports_true_scores", False))
