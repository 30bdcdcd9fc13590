"""The native ALE backend sharded over worker processes (``shards=``): the same runs as in one process,
bit for bit; errors, a dead worker and shutdown as the subprocess backend's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from retro_atari_kit.vector import WorkerDiedError, make_vector_env
from retro_atari_kit.vector.native_shards import blocks, default_shards
from tests.core.test_vector_subprocess import gone


def assert_same_tree(a, b, where: str) -> None:
    """Equal observations, rewards, flags and infos, nested dicts included; an episode's seconds (``t``,
    wall time) excepted."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            if key != "t":
                assert_same_tree(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, tuple | list) or (isinstance(a, np.ndarray) and a.dtype == object):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_tree(x, y, f"{where}[{k}]")
    else:
        np.testing.assert_array_equal(a, b, err_msg=where)


def _run(shards: int, autoreset: AutoresetMode, actions: np.ndarray) -> list:
    """Every step of a Breakout run: default no-ops (1..30), sticky actions, life losses and resets."""
    venv = make_vector_env(
        "Breakout", len(actions[0]), backend="native", shards=shards, autoreset_mode=autoreset,
        sticky_actions=0.25,
    )  # fmt: skip
    try:
        run = [venv.reset(seed=11)]
        run += [venv.step(action) for action in actions]
        run.append(venv.call("get_action_meanings"))
        return run
    finally:
        venv.close()


@pytest.mark.parametrize("autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_sharded_run_equals_the_one_process_run(autoreset):
    """Five envs over two workers (blocks of 2 and 3): with one seed and the same actions, every frame,
    reward, flag and info (life counts, true scores, final observations of a same-step autoreset) equals
    the in-process backend's: no-ops, sticky actions and resets included."""
    actions = np.random.default_rng(3).integers(0, 4, size=(500, 5))
    one, sharded = _run(1, autoreset, actions), _run(2, autoreset, actions)
    for t, (a, b) in enumerate(zip(one, sharded, strict=True)):
        assert_same_tree(a, b, f"step {t}")
    steps = sharded[1:-1]
    assert sum(int(s[2].sum()) for s in steps) >= 10  # life losses and game overs happened in both blocks
    assert {i for s in steps for i in np.flatnonzero(s[2])} == set(range(5))
    if autoreset == AutoresetMode.SAME_STEP:
        assert any("final_obs" in s[4] for s in steps)


def test_partial_reset_with_seeds_equals_the_one_process_backend():
    actions = np.random.default_rng(4).integers(0, 6, size=(40, 4))
    mask = np.array([False, True, False, True])
    runs = []
    for shards in (1, 4):
        venv = make_vector_env("Pong", 4, backend="native", shards=shards, autoreset_mode="Disabled")
        try:
            run = [venv.reset(seed=[1, 2, 3, 4])]
            run += [venv.step(a) for a in actions[:20]]
            run.append(venv.reset(seed=[None, 9, None, 10], options={"reset_mask": mask}))
            run += [venv.step(a) for a in actions[20:]]
            runs.append(run)
        finally:
            venv.close()
    for t, (a, b) in enumerate(zip(*runs, strict=True)):
        assert_same_tree(a, b, f"call {t}")


def test_dead_worker_raises_one_error_naming_its_envs_and_leaves_no_processes():
    venv = make_vector_env("Pong", 5, backend="native", shards=2)
    pids = venv.worker_pids
    assert len(pids) == 2
    venv.reset(seed=0)
    venv.step(np.zeros(5, dtype=np.int64))
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as err:
        venv.step(np.zeros(5, dtype=np.int64))
    assert time.monotonic() - start < 5
    assert err.value.rank == 2
    assert str(err.value) == (
        f"envs 2-4 (RetroKit/Pong-v0): their worker process (pid {pids[1]}) died: killed by SIGKILL "
        "(signal 9); the vector env is closed, make a new one"
    )
    with pytest.raises(WorkerDiedError):  # stays broken, no hang
        venv.step(np.zeros(5, dtype=np.int64))
    venv.close()
    venv.close()  # idempotent
    assert all(gone(pid) for pid in pids)


def test_close_reaps_workers_and_later_calls_say_closed():
    venv = make_vector_env("Pong", 2, backend="native", shards=2)
    pids = venv.worker_pids
    venv.reset(seed=0)
    venv.close()
    assert all(gone(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        venv.step(np.zeros(2, dtype=np.int64))


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_each_worker_and_its_emulators_run_under_sched_batch_and_this_process_does_not():
    """A woken worker must not preempt the main process before it has woken the others: its thread is under
    SCHED_BATCH from before its emulators start, so their C++ threads are too; this process is untouched."""

    def batched(pid: int) -> int:
        tids = os.listdir(f"/proc/{pid}/task")
        return sum(os.sched_getscheduler(int(tid)) == os.SCHED_BATCH for tid in tids)

    venv = make_vector_env("Pong", 4, backend="native", shards=2)
    try:
        venv.reset(seed=0)
        for pid in venv.worker_pids:
            assert batched(pid) >= 3  # the worker's thread and its block's two emulator threads
        assert batched(os.getpid()) == 0
    finally:
        venv.close()


def test_per_env_attributes_say_what_to_use_instead():
    venv = make_vector_env("Pong", 3, backend="native", shards=3)
    try:
        with pytest.raises(AttributeError, match="cannot set per-env 'foo'; use backend='subprocess'"):
            venv.set_attr("foo", [1, 2, 3])
        with pytest.raises(ValueError, match="action"):  # refused before any worker hears of it
            venv.step(np.array([0, 9, 0]))
        venv.reset(seed=0)
        venv.step(np.zeros(3, dtype=np.int64))  # still usable
    finally:
        venv.close()


@pytest.mark.parametrize("shards", [0, 4, True, 1.5, "2"])
def test_bad_shards_give_one_clear_error(shards):
    message = r"shards must be an int from 1 \(all envs in this process\) to num_envs=3"
    with pytest.raises(ValueError, match=message):
        gym.make_vec("RetroKit/Pong-v0", num_envs=3, backend="native", shards=shards)


@pytest.mark.parametrize(("game", "backend"), [("Pong", "subprocess"), ("Airstriker-Genesis", "auto")])
def test_shards_with_another_backend_is_refused(game, backend):
    with pytest.raises(ValueError, match=f"applies to the native ALE backend only; RetroKit/{game}-v0 uses"):
        make_vector_env(game, 2, backend=backend, shards=2)


def test_default_shards_and_blocks():
    assert [default_shards(n, cores=2) for n in (1, 4, 8, 64)] == [1, 1, 1, 1]
    assert [default_shards(n, cores=16) for n in (1, 2, 8, 16, 32, 64)] == [1, 1, 4, 8, 16, 16]
    assert blocks(5, 2) == [(0, 2), (2, 5)]
    assert blocks(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]


@pytest.mark.parametrize("shards", [None, 2])
def test_script_without_main_guard_falls_back_only_from_the_default(tmp_path, shards):
    """On many cores the default starts workers, which re-import the main script: without a main guard they
    cannot start. Left to the default, the backend then warns and runs in one process; asked for workers,
    the call raises the error that says to add the guard."""
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(f"""
            import os
            os.cpu_count = lambda: 16  # a many-core machine: the default is 2 workers for 4 envs
            import gymnasium as gym
            import retro_atari_kit
            venv = gym.make_vec("RetroKit/Pong-v0", num_envs=4, shards={shards})
            obs, _ = venv.reset(seed=0)
            print(type(venv).__name__, obs.shape)
            venv.close()
        """)
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    if shards is None:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == "StackedVectorEnv (4, 4, 84, 84)"
        assert "no_guard.py:6: UserWarning: RetroKit/Pong-v0: the native backend's 2 worker processes" in (
            proc.stderr
        )
        assert "could not start, so every env runs in this process" in proc.stderr
        assert 'under `if __name__ == "__main__":`' in proc.stderr
    else:
        assert proc.returncode == 1
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("retro_atari_kit.vector.WorkerDiedError: envs 0-1 (RetroKit/Pong-v0)"), last
