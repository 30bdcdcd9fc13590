"""scripts/time_to_score.py: when a committed run's 100-game training mean first reached a score, from
its monitor CSVs as `retrokit plot` reads them."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "time_to_score.py")
RUN = os.path.join(ROOT, "results", "pong-ppo-impala-0")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_the_first_game_at_which_the_trailing_mean_reached_the_target():
    from retro_atari_kit.runs import read_monitor_csvs

    proc = _run(RUN, "--target", "18", "--since", str(time.time()))
    assert proc.returncode == 0, proc.stderr
    row = proc.stdout.strip().splitlines()[-1].strip("| ").split(" | ")
    game, steps = int(row[3]), int(row[4].replace(",", ""))
    scores = read_monitor_csvs(RUN)["r"]
    means = np.convolve(scores, np.ones(100) / 100, mode="valid")
    assert means[game - 100] >= 18 > means[: game - 100].max()  # the first full window at 18
    assert steps == int(read_monitor_csvs(RUN)["steps"][game - 1])
    assert float(row[6]) < 0  # the run's monitor began long before "now"


def test_a_target_never_reached_is_said_and_exits_1():
    proc = _run(RUN, "--target", "21")
    assert proc.returncode == 1
    assert "not reached (last mean " in proc.stdout
