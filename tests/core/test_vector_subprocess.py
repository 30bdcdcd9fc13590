"""Shared-memory subprocess backend: start methods, stable-retro, dead workers, clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest

from retro_atari_kit.vector import make_vector_env
from retro_atari_kit.vector.subprocess import WorkerDiedError


def gone(pid: int) -> bool:
    """True when ``pid`` no longer exists (a zombie still exists: it has not been reaped)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_DEAD
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_start_methods_give_gym_make_observations(start_method):
    venv = make_vector_env("Pong", num_envs=1, backend="subprocess", start_method=start_method)
    try:
        obs, _ = venv.reset(seed=5)
        obs2, *_ = venv.step(np.array([3]))
    finally:
        venv.close()
    env = gym.make("RetroKit/Pong-v0")
    ref, _ = env.reset(seed=5)
    ref2, *_ = env.step(3)
    env.close()
    np.testing.assert_array_equal(obs[0], ref)
    np.testing.assert_array_equal(obs2[0], ref2)


def test_dead_worker_raises_error_naming_rank_and_leaves_no_processes():
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=3, backend="subprocess")
    pids = venv.worker_pids
    venv.reset(seed=0)
    venv.step(np.zeros(3, dtype=np.int64))
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match="env rank 1") as err:
        for _ in range(100):  # the very next step notices; the loop only guards against a pass
            venv.step(np.zeros(3, dtype=np.int64))
    assert err.value.rank == 1
    assert str(err.value) == (
        f"env rank 1 (RetroKit/Pong-v0): its worker process (pid {pids[1]}) died: killed by SIGKILL "
        "(signal 9); the vector env is closed, make a new one"
    )
    assert time.monotonic() - start < 5
    with pytest.raises(WorkerDiedError):  # stays broken, no hang
        venv.step(np.zeros(3, dtype=np.int64))
    venv.close()
    venv.close()  # idempotent
    assert all(gone(pid) for pid in pids)


def test_close_is_idempotent_and_reaps_workers():
    venv = gym.make_vec("RetroKit/Breakout-v0", num_envs=2, backend="subprocess")
    pids = venv.worker_pids
    venv.reset(seed=0)
    venv.close()
    venv.close()
    assert all(gone(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        venv.step(np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize("backend", ['backend="subprocess"', 'backend="native", shards=2'])
def test_ctrl_c_in_main_process_shuts_workers_down(tmp_path, backend):
    """Ctrl-C during a call closes the env at once; Ctrl-C between calls (the script's own loop) leaves it to
    the interpreter's exit. Either way no worker survives. The script reports where the interrupt landed."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent("""
        import faulthandler
        import signal
        import sys
        import traceback
        import numpy as np
        import gymnasium as gym
        import retro_atari_kit  # noqa: F401

        if __name__ == "__main__":
            # started from a background job, we inherit an ignored SIGINT: Ctrl-C must raise here regardless
            signal.signal(signal.SIGINT, signal.default_int_handler)
            faulthandler.register(signal.SIGUSR1)  # the test dumps our stacks if we hang
            venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, BACKEND)
            venv.reset(seed=0)
            print(*venv.worker_pids, flush=True)
            actions = np.zeros(2, dtype=np.int64)
            try:
                while True:
                    venv.step(actions)
            except KeyboardInterrupt as exc:
                frames = [f.f_code.co_filename for f, _ in traceback.walk_tb(exc.__traceback__)]
                in_call = any("retro_atari_kit" in name for name in frames)
                print("interrupted", "in-call" if in_call else "between-calls", venv.closed, flush=True)
                sys.exit(3)
    """).replace("BACKEND", backend)
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # faulthandler: where is it stuck?
            time.sleep(1)
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the script hung after Ctrl-C; stdout {out!r}; its stacks:\n{err}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3
    assert out.startswith("interrupted ")
    if "in-call" in out:  # the usual case: the main process spends its time waiting on the workers
        assert out.strip() == "interrupted in-call True"
    deadline = time.monotonic() + 5
    while not all(gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(pid) for pid in pids)


def test_script_without_main_guard_gets_a_hint(tmp_path):
    """forkserver workers re-import an unguarded script and die while starting: the error says why."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent("""
        import gymnasium as gym
        import retro_atari_kit  # noqa: F401

        venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")
    """)
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("retro_atari_kit.vector.WorkerDiedError: env rank 0")
    assert "while starting" in last and 'if __name__ == "__main__":' in last


def test_an_env_error_in_a_worker_arrives_as_itself_and_the_workers_go_on():
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")
    try:
        with pytest.raises(AttributeError) as err:
            venv.call("no_such_method")
        assert str(err.value) == "'CheckedCalls' object has no attribute 'no_such_method'"  # the stack's top
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 4, 84, 84)
    finally:
        venv.close()


def test_worker_construction_error_is_reported_clearly():
    with pytest.raises(ValueError, match="crop_score"):
        make_vector_env("Pong", num_envs=2, backend="subprocess", crop_score=(0, 500, 0, 160))


def test_retro_pong_matches_gym_make_per_rank():
    """stable-retro: one worker per env; env i replays as gym.make(...).reset(seed=3 + i)."""
    actions = np.random.default_rng(0).integers(0, 6, size=(60, 2))
    venv = gym.make_vec("RetroKit/Pong-Atari2600-v0", num_envs=2)
    try:
        assert venv.backend == "subprocess"
        obs, _ = venv.reset(seed=3)
        trajectory = [obs]
        rewards = []
        for action in actions:
            obs, reward, terms, truncs, _ = venv.step(action)
            assert not (terms.any() or truncs.any())
            trajectory.append(obs)
            rewards.append(reward)
    finally:
        venv.close()
    for i in range(2):
        env = gym.make("RetroKit/Pong-Atari2600-v0")  # one emulator in this process at a time
        try:
            ref, _ = env.reset(seed=3 + i)
            np.testing.assert_array_equal(trajectory[0][i], ref)
            for t, action in enumerate(actions):
                ref, reward, *_ = env.step(int(action[i]))
                np.testing.assert_array_equal(trajectory[t + 1][i], ref, err_msg=f"env {i} step {t}")
                assert rewards[t][i] == reward
        finally:
            env.close()


def test_retro_airstriker_vector_env():
    venv = gym.make_vec("RetroKit/Airstriker-Genesis-v0", num_envs=2, backend="auto")
    try:
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        obs, rewards, *_ = venv.step(venv.action_space.sample())
        assert obs.shape == (2, 4, 84, 84)
    finally:
        venv.close()


class _InfoKinds(gym.Env):
    """Every kind of step a worker meets: infos of ints, floats and bools (shared memory), a value whose type
    changes (a new schema), a nested dict, a string and a numpy value (the pipe), an exception."""

    observation_space = gym.spaces.Box(0, 255, (1, 84, 84), dtype=np.uint8)
    action_space = gym.spaces.Discrete(6)
    metadata = {"render_modes": []}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.full((1, 84, 84), 200, dtype=np.uint8), {}

    def step(self, action):
        if action == 5:
            raise ValueError("the env refused action 5")
        self.t += 1
        info = {"t": self.t, "half": self.t / 2, "even": self.t % 2 == 0}
        if action == 1:
            info["t"] = float(self.t)
        elif action == 2:
            info["extra"] = {"nested": self.t}
        elif action == 3:
            info["name"] = "toy"
        elif action == 4:
            info = {"t": np.int64(self.t)}
        obs = np.full((1, 84, 84), self.t % 256, dtype=np.uint8)
        return obs, float(action) - 1.5, self.t % 9 == 0, self.t % 13 == 0, info


def _assert_same(got, want, where: str) -> None:
    """The same keys, masks, dtypes and values at every level."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert sorted(got) == sorted(want), f"{where}: {sorted(got)} != {sorted(want)}"
        for key in want:
            _assert_same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and (got.dtype, got.shape) == (want.dtype, want.shape), where
        if want.dtype == object:
            for i, (a, b) in enumerate(zip(got, want, strict=True)):
                _assert_same(a, b, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_every_kind_of_step_equals_the_in_process_backend(mode):
    """Whatever way a step's result travels (shared memory, the pipe, a new schema, workers whose schemas
    differ, an env's exception), observations, rewards, flags and infos equal the in-process backend's."""
    from retro_atari_kit.vector.inprocess import make_inprocess_vector_env
    from retro_atari_kit.vector.subprocess import make_subprocess_vector_env

    factories = [_InfoKinds] * 3
    # fork: the workers need not import this module to find the env class
    kit = make_subprocess_vector_env(factories, 4, mode, start_method="fork")
    ref = make_inprocess_vector_env(factories, 4, mode)
    rng = np.random.default_rng(0)
    # mostly infos that fit shared memory, every other kind now and then; env 2 sometimes raises
    actions = rng.choice(5, size=(120, 3), p=[0.7, 0.1, 0.1, 0.05, 0.05])
    actions[rng.random(120) < 0.05, 2] = 5
    try:
        for env in (kit, ref):
            env.reset(seed=1)
        for t, action in enumerate(actions):
            results = []
            for env in (kit, ref):
                try:
                    results.append(env.step(action))
                except ValueError as exc:
                    results.append(exc)
            got, want = results
            if isinstance(want, Exception):
                assert type(got) is ValueError and str(got) == str(want), f"step {t}"
                continue
            for k, name in enumerate(("obs", "reward", "terminated", "truncated", "info")):
                _assert_same(got[k], want[k], f"step {t} {name}")
    finally:
        kit.close()
        ref.close()


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_close_unlinks_the_shared_memory_and_the_semaphores(start_method):
    venv = make_vector_env("Pong", num_envs=2, backend="subprocess", start_method=start_method)
    driver = venv.driver
    names = [f"/dev/shm/{driver._shm.name.lstrip('/')}"]
    names += [
        f"/dev/shm/sem.{semaphore._semlock.name.lstrip('/')}" for semaphore in driver._wakeups._semaphores
    ]
    assert all(os.path.exists(name) for name in names)
    venv.reset(seed=0)
    venv.step(np.zeros(2, dtype=np.int64))
    venv.close()
    assert not [name for name in names if os.path.exists(name)]


def test_a_vector_env_never_closed_ends_with_the_interpreter(tmp_path):
    """Workers wait on their semaphore, not their pipe: the stop sent at interpreter exit reaches them."""
    script = tmp_path / "unclosed.py"
    script.write_text(
        textwrap.dedent("""
        import numpy as np
        import gymnasium as gym
        import retro_atari_kit  # noqa: F401

        if __name__ == "__main__":
            venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")
            venv.reset(seed=0)
            venv.step(np.zeros(2, dtype=np.int64))
            print(*venv.worker_pids, flush=True)
            globals()["kept"] = venv  # never closed
    """)
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    deadline = time.monotonic() + 5
    while not all(gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(pid) for pid in pids)
