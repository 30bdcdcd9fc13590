"""True game scores as RLlib metrics.

RLlib's ``episode_return_mean`` for a RetroKit env is the mean clipped return of one *life* (the env ends
training episodes at life losses and clips rewards, as DeepMind's setup does). The kit's env reports the
real game in ``info["episode"]`` (unclipped score over all lives, length in agent steps) on the step where
the game ends; :class:`TrueScoreCallback` turns that into

- ``result["env_runners"]["true_score_mean"]``: mean true score of the last 100 games per runner;
- ``result["env_runners"]["kit_games"]``: every game finished since the last iteration, as
  ``(rank, score, length)`` with ``rank = (runner - 1) * envs_per_runner + env``, which the driver writes
  to ``monitor/<rank>.monitor.csv`` (the runners may be on other machines; the run dir is on the driver's).
"""

from __future__ import annotations

from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

TRUE_SCORE = "true_score_mean"
GAMES = "kit_games"

__all__ = ["GAMES", "TRUE_SCORE", "TrueScoreCallback", "game_rank"]


def game_rank(worker_index: int, num_envs: int, env_index: int) -> int:
    """Global env rank: remote runners are numbered from 1; the local runner (index 0) samples alone."""
    return max(int(worker_index) - 1, 0) * int(num_envs) + int(env_index)


class TrueScoreCallback(RLlibCallback):
    """Logs the true score of every finished game (see the module docstring)."""

    def on_episode_end(
        self,
        *,
        episode: Any,
        env_runner: Any = None,
        metrics_logger: Any = None,
        env_index: int = 0,
        **kwargs: Any,
    ) -> None:
        if metrics_logger is None:
            return
        info = episode.get_infos(-1)
        game = info.get("episode") if isinstance(info, dict) else None
        if not game:  # a life ended, the game goes on
            return
        num_envs = getattr(getattr(env_runner, "config", None), "num_envs_per_env_runner", 1)
        rank = game_rank(getattr(env_runner, "worker_index", 0), num_envs, env_index)
        score, length = float(game["r"]), int(game["l"])
        metrics_logger.log_value(TRUE_SCORE, score, reduce="mean", window=100)
        metrics_logger.log_value(GAMES, (rank, score, length), reduce="item_series")
