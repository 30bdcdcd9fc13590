"""rl-zoo3 as installed by the README logs true game scores on a game with lives and non-unit rewards:
``train``'s monitor CSVs and ``enjoy``'s per-game lines (SpaceInvaders: 3 lives, 5-30 points per hit)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

GAME = "RetroKit/SpaceInvaders-v0"
# rl_zoo3 (the zoo extra) runs in subprocesses only: importing it here would replace gymnasium's TimeLimit
# for the whole test process. Without the extra the subprocess fails and names the missing module.


def _zoo(module: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", module, "--gym-packages", "retro_atari_kit", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_zoo_train_monitor_csvs_and_enjoy_report_true_scores(tmp_path):
    _zoo(
        "rl_zoo3.train",
        *("--algo", "ppo", "--env", GAME, "--conf-file", "retro_atari_kit.integrations.zoo.ppo"),
        *("-n", "1536", "--hyperparams", "n_envs:2", "n_steps:128", "batch_size:128", "n_epochs:1"),
        *("-f", str(tmp_path), "--eval-freq", "-1", "--seed", "0", "--device", "cpu"),
    )
    run = tmp_path / "ppo" / "RetroKit-SpaceInvaders-v0_1"
    scores = []
    for rank in range(2):
        lines = (run / f"{rank}.monitor.csv").read_text().splitlines()[1:]
        scores += [float(row["r"]) for row in csv.DictReader(lines)]
    assert scores and all(s % 5 == 0 for s in scores) and max(scores) >= 50, scores

    proc = _zoo(
        "rl_zoo3.enjoy",
        *("--algo", "ppo", "--env", GAME, "--exp-id", "1", "-n", "1400", "--no-render"),
        *("-f", str(tmp_path), "--device", "cpu", "--seed", "0"),
    )
    games = [float(x) for x in re.findall(r"Atari Episode Score: (-?[\d.]+)", proc.stdout)]
    assert games and all(s % 5 == 0 for s in games), proc.stdout[-2000:]
    assert "Episode Reward:" not in proc.stdout  # no per-life sums of clipped rewards
