"""Finished games reach the run dir however RLlib's metrics reduce them: RLlib's real MetricsLogger
aggregates runner results as the algorithm does, and a single finished game comes back as a bare
``(rank, score, length)`` tuple rather than a one-item list (this crashed a Pong run at its first game)."""

from __future__ import annotations

import csv
import glob
import os

import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from retro_atari_kit.integrations.rllib.callbacks import GAMES
from retro_atari_kit.integrations.rllib.logs import RunLogger, finished_games


def iteration_result(games_per_runner: list[list[tuple[int, float, int]]]) -> dict:
    """What ``algo.train()`` returns under ``env_runners`` after the runners logged these games."""
    reduced = []
    for games in games_per_runner:
        runner = MetricsLogger()
        for game in games:
            runner.log_value(GAMES, game, reduce="item_series")
        reduced.append(runner.reduce())
    root = MetricsLogger(root=True)
    root.aggregate(reduced, key="env_runners")
    result = root.compile()
    result.setdefault("env_runners", {})
    result["training_iteration"] = 1
    return result


@pytest.mark.parametrize(
    "games_per_runner",
    [[[]], [[(0, -21.0, 812)]], [[(0, -21.0, 812), (1, -20.0, 901)]], [[(0, -21.0, 812)], [(4, 3.0, 2000)]]],
    ids=["none", "one", "two-one-runner", "one-per-runner"],
)
def test_finished_games_are_a_list_of_games(games_per_runner):
    expected = sorted(game for games in games_per_runner for game in games)
    assert sorted(finished_games(iteration_result(games_per_runner))) == expected


def log_once(run_dir: str, segment: int, games: list[tuple[int, float, int]], steps: int) -> dict:
    """The progress row of one iteration that finished ``games``, logged by a segment's own RunLogger."""
    logger = RunLogger(run_dir, "RetroKit/Pong-v0", num_envs=8, segment=segment, start_steps=steps - 1024)
    try:
        return logger.log(iteration_result([games]), steps=steps)
    finally:
        logger.close()


def test_run_logger_writes_a_single_game(tmp_path):
    row = log_once(str(tmp_path), 0, [(3, -19.0, 900)], steps=1024)
    assert row["rollout/ep_rew_mean"] == -19.0 and row["rollout/games"] == 1
    (monitor,) = glob.glob(os.path.join(str(tmp_path), "monitor", "**", "3.monitor.csv"), recursive=True)
    with open(monitor, encoding="utf-8") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    assert [(float(r["r"]), int(r["l"])) for r in rows] == [(-19.0, 900)]


def test_a_resumed_segment_goes_on_from_the_runs_last_games(tmp_path):
    log_once(str(tmp_path), 0, [(0, -21.0, 800), (1, -19.0, 900)], steps=1024)
    row = log_once(str(tmp_path), 1, [(2, -14.0, 1300)], steps=2048)
    assert row["rollout/ep_rew_mean"] == -18.0 and row["rollout/ep_len_mean"] == 1000.0
    assert row["rollout/games"] == 3


def test_the_step_count_never_goes_back():
    from retro_atari_kit.integrations.rllib.training import run_steps

    # a resumed run: its checkpoint's steps plus what RLlib counted since the restore
    assert run_steps(previous=5000, start=5000, base=800, reading=1120) == 5320
    # an iteration whose lifetime reading is missing (read as 0) keeps the count, so a stop
    # right after it names its checkpoint by the steps already logged, not by 0
    assert run_steps(previous=5320, start=5000, base=800, reading=0) == 5320
    assert run_steps(previous=0, start=0, base=0, reading=0) == 0
