"""The hand-run benchmark scripts still start: their imports resolve and their arguments parse.

They are run by hand, never timed here (docs/performance.md has the figures); this only keeps them from
rotting unnoticed when the kit's API changes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))


def test_every_benchmark_is_listed_in_the_performance_docs():
    docs = (BENCHMARKS.parent / "docs" / "performance.md").read_text()
    assert SCRIPTS, "no benchmark scripts found"
    assert [s for s in SCRIPTS if f"benchmarks/{s}" not in docs] == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_help(script):
    proc = subprocess.run(
        [sys.executable, script, "--help"], cwd=BENCHMARKS, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ")


# -- the GPU suite: its no-CUDA line and its whole code path on the CPU ----------------------------------
SUITE = BENCHMARKS / "gpu_suite.py"
NO_CUDA = "no CUDA device: the GPU suite needs one; nothing measured\n"
NUMBER = re.compile(r"[\d,]+(\.\d)?")
RATIO = re.compile(r"\d+\.\d\dx")


def _no_gpu_env() -> dict[str, str]:
    # hides any GPU, so the no-CUDA path is what runs on every machine; one thread: CI boxes are small, shared
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


def _tables(markdown: str) -> dict[str, list[list[str]]]:
    """The report's tables by section: the section's heading (up to the first ":" or "(") -> rows of
    cells, the header row first."""
    tables: dict[str, list[list[str]]] = {}
    section = "header"
    for line in markdown.splitlines():
        if line.startswith("#"):
            section = re.split(r"[:(]", line.lstrip("# "))[0].strip()
        elif line.startswith("|") and not line.startswith("|---"):
            tables.setdefault(section, []).append([c.strip() for c in line.strip().strip("|").split("|")])
    return tables


def test_gpu_suite_without_cuda_says_so_in_one_line_and_writes_nothing(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SUITE)],
        cwd=tmp_path,
        env=_no_gpu_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == NO_CUDA
    assert list(tmp_path.iterdir()) == []  # no report: nothing was measured


def test_gpu_suite_cpu_smoke_runs_every_section(tmp_path):
    out = tmp_path / "smoke.md"
    proc = subprocess.run(
        [sys.executable, str(SUITE), "--cpu-smoke", "--out", str(out)],
        cwd=tmp_path,
        env=_no_gpu_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = out.read_text()
    assert report.strip() in proc.stdout  # the same report on stdout
    assert report.startswith("# GPU suite (CPU smoke run)\n") and "- error in" not in report
    tables = _tables(report)
    assert list(tables) == [
        "GPU suite",
        "CUDA tests",
        "Env throughput",
        "PPO, `gpu` preset",
        "PPO, FastPPO `gpu-fast` against plain SB3",
        "DQN, Pong, 1 env, on cpu",
    ]
    info = {row[0]: row[1] for row in tables["GPU suite"]}
    assert info["device"].startswith("CPU ") and info["torch"].startswith(torch.__version__)
    assert info["command"] == f"python benchmarks/gpu_suite.py --cpu-smoke --out {out}"
    # the CUDA tests were collected, and every one was skipped for want of CUDA
    header, counts = tables["CUDA tests"]
    tests = dict(zip(header, counts, strict=True))
    assert (tests["passed"], tests["failed"], tests["errors"]) == ("0", "0", "0")
    assert int(tests["skipped"]) > 20
    assert "Skip reasons: needs CUDA" in report
    # env throughput: every contender measured, the kit's ratios
    env = {row[0]: row[1:] for row in tables["Env throughput"]}
    assert env["contender"] == ["N=2"]
    for name in (
        "kit gym.make_vec (auto)",
        "SB3 SubprocVecEnv+VecFrameStack",
        "ale-py AtariVectorEnv (raw, ceiling)",
    ):
        assert NUMBER.fullmatch(env[name][0]), env[name]
    assert RATIO.fullmatch(env["kit / SB3 SubprocVecEnv+VecFrameStack"][0])
    # PPO: both networks, kit against plain SB3 in the same row
    header, *rows = tables["PPO, `gpu` preset"]
    assert header[:3] == ["network", "sb3", "kit"] and "kit / sb3" in header
    assert [row[0] for row in rows] == ["nature", "impala"]
    for row in rows:
        cells = dict(zip(header, row, strict=True))
        assert NUMBER.fullmatch(cells["sb3"]) and NUMBER.fullmatch(cells["kit"]), cells
        assert RATIO.fullmatch(cells["kit / sb3"]), cells
    # FastPPO: against plain SB3 and the kit's gpu preset, same rows (no compiled row on a CPU)
    header, *rows = tables["PPO, FastPPO `gpu-fast` against plain SB3"]
    assert header == ["network", "sb3", "kit gpu", "fast", "kit gpu / sb3", "fast / sb3"]
    assert [row[0] for row in rows] == ["nature", "impala"]
    for row in rows:
        assert all(NUMBER.fullmatch(cell) for cell in row[1:4]), row
        assert all(RATIO.fullmatch(cell) for cell in row[4:]), row
    # DQN: synchronous against pong-dqn-fast (with and without its play process), ratios side by side
    header, *rows = tables["DQN, Pong, 1 env, on cpu"]
    assert header == ["contender", "steps/s", "/ sb3", "/ kit sync", "CPU ms per step"]
    names = ["sb3", "kit sync (pong-dqn)", "pong-dqn-fast, no play process", "pong-dqn-fast (play process)"]
    assert [row[0] for row in rows] == names
    for _, steps, to_sb3, to_sync, cpu_ms in rows:
        assert NUMBER.fullmatch(steps) and RATIO.fullmatch(to_sb3) and RATIO.fullmatch(to_sync)
        assert NUMBER.fullmatch(cpu_ms)


def test_plain_sb3_contenders_use_sb3s_own_classes(monkeypatch):
    """The ``sb3`` rows measure SB3 as its users run it, at the preset's numbers only: not the kit's
    policy, rollout buffer, fused Adam or replay (for DQN: SB3's own n-step buffer where the preset has
    n-step returns)."""
    from stable_baselines3.common.buffers import RolloutBuffer
    from stable_baselines3.common.policies import ActorCriticCnnPolicy
    from stable_baselines3.dqn.policies import CnnPolicy

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import dqn_fast_throughput
    import ppo_throughput

    ppo = ppo_throughput.make_sb3("nature", "gpu", overrides={"n_envs": 1, "n_steps": 8})
    ppo.get_env().close()
    assert type(ppo.policy) is ActorCriticCnnPolicy and type(ppo.rollout_buffer) is RolloutBuffer
    assert ppo.batch_size == 1024 and not ppo.policy.optimizer.defaults.get("fused")
    dqn, venv = dqn_fast_throughput.make_sb3(100, overrides={"buffer_size": 1000})
    venv.close()
    assert type(dqn.policy) is CnnPolicy and dqn.replay_buffer.__module__.startswith("stable_baselines3")
