"""A vector env used from two threads at once, and copies of one (docs/vectorization.md, "Threads and
copies"): a call from a second thread while another is inside a call is refused with one line before
anything changes (the subprocess backend used to deadlock on its workers' pipes), and ``copy.copy``,
``copy.deepcopy`` and ``pickle`` are refused before anything is touched (deepcopy used to fail half-way and
leave the original unusable). Real threads, real workers, real emulators."""

from __future__ import annotations

import copy
import pickle
import threading

import gymnasium as gym
import numpy as np
import pytest

BACKENDS = ["subprocess", "native", "inprocess"]
GAME = "RetroKit/Pong-v0"
N = 2
NOOP = np.zeros(N, dtype=np.int64)


def _twin_after(backend: str, steps: int) -> np.ndarray:
    """The observation of a fresh env of the same seed after ``steps`` NOOP steps."""
    twin = gym.make_vec(GAME, num_envs=N, backend=backend)
    try:
        obs, _ = twin.reset(seed=3)
        for _ in range(steps):
            obs = twin.step(NOOP)[0]
        return obs
    finally:
        twin.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", BACKENDS)
def test_two_threads_stepping_one_env_are_refused_not_deadlocked(backend):
    venv = gym.make_vec(GAME, num_envs=N, backend=backend)
    try:
        venv.reset(seed=3)
        done, refusals, stepped, errors = threading.Event(), [], [0, 0], []
        last = [None]

        def player(slot: int) -> None:
            try:
                while not done.is_set():
                    try:
                        last[0] = venv.step(NOOP)[0]
                    except RuntimeError as exc:
                        refusals.append(str(exc))
                        continue
                    stepped[slot] += 1
                    if sum(stepped) >= 300 and refusals:
                        done.set()
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                errors.append(exc)
                done.set()

        threads = [threading.Thread(target=player, args=(slot,), daemon=True) for slot in (0, 1)]
        for thread in threads:
            thread.start()
        done.wait(timeout=120)
        done.set()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads), "a thread is stuck in a call: deadlock"
        assert errors == []
        assert refusals, "the two threads never overlapped"
        message = refusals[0]
        assert "\n" not in message
        assert message.startswith(f"{venv!r}.step() refused: another thread is in a call on this vector env")
        assert "give each thread its own env" in message
        # a refused call changed nothing: the env is where the successful steps alone would have taken it
        assert np.array_equal(venv.step(NOOP)[0], _twin_after(backend, sum(stepped) + 1))
    finally:
        venv.close()


def test_the_same_thread_may_use_the_env_again_and_other_threads_in_turn():
    venv = gym.make_vec(GAME, num_envs=N, backend="subprocess")
    try:
        venv.reset(seed=3)
        out = []
        for _ in range(3):  # one after the other: no refusal
            thread = threading.Thread(target=lambda: out.append(venv.step(NOOP)[0]))
            thread.start()
            thread.join(timeout=60)
        assert len(out) == 3 and venv.get_attr("render_mode") == (None, None)  # get_attr nests call()
        assert np.array_equal(venv.step(NOOP)[0], _twin_after("subprocess", 4))
    finally:
        venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["deepcopy", "copy", "pickle"])
def test_copies_are_refused_and_the_original_plays_on(backend, how):
    venv = gym.make_vec(GAME, num_envs=N, backend=backend)
    try:
        venv.reset(seed=3)
        venv.step(NOOP)
        do = {"deepcopy": copy.deepcopy, "copy": copy.copy, "pickle": pickle.dumps}[how]
        with pytest.raises(TypeError) as info:
            do(venv)
        message = str(info.value)
        assert "\n" not in message
        assert message == (
            f"{venv!r} cannot be copied or pickled: it owns running emulators (threads, worker processes, "
            "shared memory); make another with gym.make_vec(env_id, num_envs=...)"
        )
        assert np.array_equal(venv.step(NOOP)[0], _twin_after(backend, 2))
    finally:
        venv.close()
