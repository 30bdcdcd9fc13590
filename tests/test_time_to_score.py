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
    game, run_steps, steps = int(row[3]), row[4], int(row[5].replace(",", ""))
    scores = read_monitor_csvs(RUN)["r"]
    means = np.convolve(scores, np.ones(100) / 100, mode="valid")
    assert means[game - 100] >= 18 > means[: game - 100].max()  # the first full window at 18
    assert steps == int(read_monitor_csvs(RUN)["steps"][game - 1])
    # its monitor CSVs predate segment_steps: the run's count read off the logger's clock, results.md's 506k
    assert run_steps.startswith("~") and abs(int(run_steps[1:].replace(",", "")) - 506_000) < 2_000
    assert float(row[7]) < 0  # the run's monitor began long before "now"


def test_the_runs_own_step_count_and_the_curve_where_the_monitor_has_it(tmp_path):
    from retro_atari_kit.runs import MonitorCSV, create_run_dir, monitor_dir, new_config, write_config

    run = str(tmp_path / "run")
    create_run_dir(run)
    write_config(run, new_config("sb3", "retrokit train ...", algo="ppo", env_id="RetroKit/Pong-v0"))
    monitor = MonitorCSV(monitor_dir(run), "RetroKit/Pong-v0", num_envs=1, segment_steps=True)
    for k in range(150):  # 50 lost games, then 100 won: the 100-game mean reaches 18 at game 143 (93 won)
        monitor.write(0, -21.0 if k < 50 else 21.0, 1002, 1000 * (k + 1))
    monitor.close()
    proc = _run(run, "--target", "18", "--every", "50000")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[2].strip("| ").split(" | ")[3:6] == ["143", "143,000", "143,286"]
    assert lines[4] == "| agent steps | 50,000 | 100,000 | 150,000 |"  # the last game ends on a mark
    assert lines[6] == "| training mean (100 games) | -21.00 | 0.00 | 21.00 |"


def test_a_target_never_reached_is_said_and_exits_1():
    proc = _run(RUN, "--target", "21")
    assert proc.returncode == 1
    assert "not reached (last mean " in proc.stdout


def test_older_runs_count_read_off_the_loggers_clock_across_a_resume(tmp_path):
    """Without segment_steps, a game's count is progress.csv's step count interpolated at its end time, in
    the segment it ended in: the logger's clock starts again at a resume, each monitor folder says when its
    segment began."""
    run = tmp_path / "run"
    (run / "monitor" / "resume-1").mkdir(parents=True)
    header = '#{{"t_start": {}, "env_id": "RetroKit/Pong-v0"}}\nr,l,t\n'
    (run / "monitor" / "0.monitor.csv").write_text(header.format(1000.0) + "-21,900,15.0\n")
    # the resumed segment's clock: its first row at 10 s; the game ended 5 s into it
    (run / "monitor" / "resume-1" / "0.monitor.csv").write_text(header.format(2000.0) + "21,900,5.0\n")
    (run / "progress.csv").write_text(
        "time/total_timesteps,time/time_elapsed\n1000,10\n2000,20\n3000,10\n4000,20\n"
    )
    proc = _run(str(run), "--target", "0", "--window", "1", "--every", "1000")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[2].strip("| ").split(" | ")[3:6] == ["2", "~2,500", "1,800"]
    assert lines[4] == "| agent steps | ~1,000 | ~2,000 | ~2,500 |"
    assert lines[6] == "| training mean (1 games) |  | -21.00 | 21.00 |"

    (run / "progress.csv").write_text("time/total_timesteps,time/time_elapsed\n1000,10\n2000,20\n")
    lines = _run(str(run), "--target", "0", "--window", "1").stdout.strip().splitlines()
    assert lines[2].strip("| ").split(" | ")[4] == ""  # one segment logged, two in the monitor: unknown
