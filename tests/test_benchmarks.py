"""The hand-run benchmark scripts still start and run: their imports resolve, their arguments parse, each
runs its quickest settings end to end, and every one measures through the shared harness.

They are run by hand, never timed here (docs/performance.md has the figures); this only keeps them from
rotting unnoticed when the kit's API changes. The harness itself: tests/test_benchmark_harness.py.
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

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
LIBRARY = {"__init__.py", "harness.py"}  # the package and its harness; every other module is a script
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in LIBRARY)


def test_every_benchmark_is_listed_in_the_performance_docs():
    docs = (BENCHMARKS.parent / "docs" / "performance.md").read_text()
    assert SCRIPTS, "no benchmark scripts found"
    assert [s for s in [*SCRIPTS, "harness.py"] if f"benchmarks/{s}" not in docs] == []


def test_every_benchmark_measures_through_the_harness_and_imports_siblings_as_a_package():
    """One copy of rounds, medians, CPU accounting and tables (benchmarks/harness.py); a script reuses
    another's contenders as ``from benchmarks import x``, never by a bare name off its own folder."""
    siblings = "|".join(re.escape(Path(s).stem) for s in [*SCRIPTS, "harness.py"])
    bare = re.compile(rf"^\s*(import ({siblings})\b|from ({siblings}) import)", re.MULTILINE)
    for script in SCRIPTS:
        text = (BENCHMARKS / script).read_text()
        assert "from benchmarks import harness" in text or "from benchmarks.harness import" in text, script
        assert not bare.search(text), f"{script}: {bare.search(text).group(0)}"
        assert "def measure(" not in text or "harness." in text.split("def measure(", 1)[1], script


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


def _run_script(
    script: Path, *args: str, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python <script> <args>`` in ``cwd`` with no GPU visible (``env``: the whole environment instead)."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=_no_gpu_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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
    proc = _run_script(SUITE, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == NO_CUDA
    assert list(tmp_path.iterdir()) == []  # no report: nothing was measured


def test_gpu_suite_cpu_smoke_runs_every_section(tmp_path):
    out = tmp_path / "smoke.md"
    proc = _run_script(SUITE, "--cpu-smoke", "--out", str(out), cwd=tmp_path, timeout=600)
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
        "PPO, the `gpu` preset's FastPPO against plain SB3",
        "DQN, Pong, 1 env, on cpu",
        "Where FastPPO's time goes",
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
    # FastPPO: against plain SB3 and SB3's PPO on the kit's env, same rows (no graph or compiled row on a CPU)
    header, *rows = tables["PPO, the `gpu` preset's FastPPO against plain SB3"]
    assert header == [
        "network",
        "sb3",
        "kit, SB3's PPO",
        "fast eager",
        "kit, SB3's PPO / sb3",
        "fast eager / sb3",
    ]
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
    # the profile: both networks, the env's share of the rollout, the overlap bound, the profiler's operators
    header, *rows = tables["Where FastPPO's time goes"]
    assert header == ["network", "steps/s", "rollout s", "of which env s", "update s", "overlap bound"]
    assert [row[0] for row in rows] == ["nature", "impala"]
    for _, steps, rollout, env, update, bound in rows:
        assert NUMBER.fullmatch(steps) and float(rollout) > 0 and float(update) > 0
        assert re.fullmatch(r"\d+\.\d{3} \(\d+%\)", env) and float(env.split()[0]) <= float(rollout)
        assert RATIO.fullmatch(bound) and 1.0 <= float(bound[:-1]) <= 2.0
    assert report.count("one rollout and update, top operators:") == 2 and "Self CPU time total" in report


def test_plain_sb3_contenders_use_sb3s_own_classes(monkeypatch):
    """The ``sb3`` rows measure SB3 as its users run it, at the preset's numbers only: not the kit's
    policy, rollout buffer, fused Adam or replay (for DQN: SB3's own n-step buffer where the preset has
    n-step returns)."""
    from stable_baselines3.common.buffers import RolloutBuffer
    from stable_baselines3.common.policies import ActorCriticCnnPolicy
    from stable_baselines3.dqn.policies import CnnPolicy

    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import dqn_fast_throughput, ppo_throughput

    ppo = ppo_throughput.make_sb3("nature", "gpu", overrides={"n_envs": 1, "n_steps": 8})
    ppo.get_env().close()
    assert type(ppo.policy) is ActorCriticCnnPolicy and type(ppo.rollout_buffer) is RolloutBuffer
    assert ppo.batch_size == 256 and not ppo.policy.optimizer.defaults.get("fused")
    dqn, venv = dqn_fast_throughput.make_sb3(100, overrides={"buffer_size": 1000})
    venv.close()
    assert type(dqn.policy) is CnnPolicy and dqn.replay_buffer.__module__.startswith("stable_baselines3")


# -- every script's own main, at its quickest settings ---------------------------------------------------
QUICK = {
    "ale_core_cost.py": ["--quick"],
    "vec_throughput.py": ["--quick", "--sizes", "2", "--env-steps", "200", "--only", "kit auto", "raw"]
    + ["--skip-retro"],
    "main_thread_cpu.py": ["--quick"],
    "native_ab.py": ["--quick", "--with", "raw"],
    "ppo_throughput.py": ["--quick"],
    "dqn_fast_throughput.py": ["--quick"],
    "dqn_throughput.py": ["--quick"],
    "rllib_throughput.py": ["--quick", "--only", "kit-sb3"],  # RLlib's own contenders start Ray: minutes
}
# the first column of each script's last table: its contenders
LAST_TABLE_ROWS = {
    "ale_core_cost.py": [
        "ALE alone (4 frames, 2 RGB screens, their max)",
        "single-env core, its thread",
        "of which beyond ALE alone",
        "single-env core, caller: send",
        "single-env core, caller: recv while the step runs",
        "single-env core, caller: recv of a finished step",
        "8-env core, per env step (every thread)",
    ],
    "vec_throughput.py": ["kit auto (native) / ale-py AtariVectorEnv (raw)"],
    "main_thread_cpu.py": ["2"] * 2,  # N: kit native against raw, one process
    "native_ab.py": ["2", "2"],
    "ppo_throughput.py": ["sb3", "kit", "kit-fast"],
    "dqn_fast_throughput.py": ["sb3", "kit"],
    "dqn_throughput.py": ["sb3", "kit"],
    "rllib_throughput.py": ["kit-sb3"],
}


def test_every_script_is_smoke_tested():
    assert sorted([*QUICK, "gpu_suite.py", "gil_time.py"]) == SCRIPTS


@pytest.mark.parametrize("script", sorted(QUICK))
def test_benchmark_quick_run_writes_its_report(script, tmp_path):
    """``--quick`` runs the script's own main end to end (the figures mean nothing) and ``--out`` gets the
    markdown it printed."""
    out = tmp_path / "report.md"
    proc = _run_script(BENCHMARKS / script, *QUICK[script], "--out", str(out), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    report = out.read_text()
    lines = [line for line in report.splitlines() if line]
    assert [line for line in proc.stdout.splitlines() if line in lines] == lines  # printed as it was made
    tables = [block for block in report.split("\n\n") if block.startswith("|")]
    assert tables, report
    rows = [line.split("|")[1].strip() for line in tables[-1].splitlines()[2:]]
    expected = LAST_TABLE_ROWS[script]
    if script == "ppo_throughput.py" and len(rows) == 4:
        expected = [*expected, "kit-bf16"]  # only where the CPU has native bf16
    assert rows == expected, tables[-1]
    if script != "rllib_throughput.py":  # its ratios need RLlib's own contenders
        assert re.search(r"\d+\.\d+x", tables[-1].splitlines()[-1]), tables[-1]  # against the baseline


def test_gil_time_without_py_spy_says_what_to_install(tmp_path):
    env = {**_no_gpu_env(), "PATH": str(tmp_path)}  # no py-spy on this PATH (the interpreter is absolute)
    proc = _run_script(BENCHMARKS / "gil_time.py", "--quick", cwd=tmp_path, timeout=120, env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "gil_time.py needs py-spy: pip install py-spy\n"
