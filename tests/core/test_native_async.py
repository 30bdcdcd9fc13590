"""EnvPool-style async stepping of the native backend (``batch_size``): each env's trajectory through
``send`` / ``recv`` is the one ``step`` gives for the same seed and actions, and misuse is refused in one line
before anything changes (real emulator throughout)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import retro_atari_kit  # noqa: F401

GAME = "RetroKit/Breakout-v0"  # lives, FIRE reset, life-loss episode ends
KW = dict(sticky_actions=0.25, max_episode_steps=300)  # default no-ops; sticky draws; truncations too
N, STEPS = 4, 400


class _Actions:
    """Env ``i``'s t-th action, the same in both runs however far each env gets (async envs run at their own
    pace: one whose reset takes several emulator steps falls behind the others)."""

    def __init__(self):
        self.streams = [np.random.default_rng([3, i]) for i in range(N)]

    def next(self, i: int) -> int:
        return int(self.streams[i].integers(0, 4))


def _record(per_env, i, obs, reward, term, trunc, info, row):
    episode = None
    if "episode" in info and info["_episode"][row]:
        episode = (float(info["episode"]["r"][row]), int(info["episode"]["l"][row]))
    per_env[i].append((obs.copy(), float(reward), bool(term), bool(trunc), int(info["lives"][row]), episode))


def _sync_run() -> list[list]:
    env = gym.make_vec(GAME, num_envs=N, backend="native", shards=1, **KW)
    actions = _Actions()
    per_env: list[list] = [[] for _ in range(N)]
    try:
        obs, info = env.reset(seed=11)
        for i in range(N):
            _record(per_env, i, obs[i], 0.0, False, False, info, i)
        for _ in range(STEPS):
            obs, rewards, terms, truncs, info = env.step(np.array([actions.next(i) for i in range(N)]))
            for i in range(N):
                _record(per_env, i, obs[i], rewards[i], terms[i], truncs[i], info, i)
    finally:
        env.close()
    return per_env


def _async_run(batch_size: int) -> list[list]:
    env = gym.make_vec(GAME, num_envs=N, batch_size=batch_size, **KW)
    actions = _Actions()
    per_env: list[list] = [[] for _ in range(N)]
    try:
        env.async_reset(seed=11)
        while min(len(steps) for steps in per_env) <= STEPS:
            obs, rewards, terms, truncs, info = env.recv()
            ids = info["env_id"]
            assert obs.shape == (len(ids), 4, 84, 84) and obs.dtype == np.uint8
            for row, i in enumerate(ids.tolist()):
                _record(per_env, i, obs[row], rewards[row], terms[row], truncs[row], info, row)
            env.send(np.array([actions.next(i) for i in ids.tolist()]), ids)
    finally:
        env.close()
    return per_env


@pytest.fixture(scope="module")
def sync_run():
    return _sync_run()


@pytest.mark.parametrize("batch_size", [1, 2, N])
def test_each_env_s_trajectory_equals_step_s(sync_run, batch_size):
    run = _async_run(batch_size)
    ends = sum(step[2] or step[3] for steps in sync_run for step in steps)
    games = sum(step[5] is not None for steps in sync_run for step in steps)
    assert ends >= 8 and games >= 1  # life losses, game ends and truncations were all exercised
    for i in range(N):
        want, got = sync_run[i], run[i][: STEPS + 1]
        for t, (a, b) in enumerate(zip(want, got, strict=True)):
            assert np.array_equal(a[0], b[0]), f"env {i} step {t}: observations differ"
            assert a[1:] == b[1:], f"env {i} step {t}: {a[1:]} != {b[1:]}"


def test_misuse_is_refused_in_one_line_and_changes_nothing():
    env = gym.make_vec(GAME, num_envs=N, batch_size=2, noop_max=0)
    try:
        env.async_reset(seed=0)
        with pytest.raises(RuntimeError, match=r"step\(\) while 4 envs are in flight"):
            env.step(np.zeros(N, dtype=np.int64))
        with pytest.raises(RuntimeError, match=r"send\(\) to envs \[0\] that are still in flight"):
            env.send(np.array([0]), np.array([0]))
        obs, *_, info = env.recv()
        ids = info["env_id"]
        with pytest.raises(ValueError, match=r"one int in \[0, 3\] per env; env 1's action is 9"):
            env.send(np.array([0, 9]), ids)
        with pytest.raises(ValueError, match="distinct indices"):
            env.send(np.array([0, 0]), np.array([ids[0], ids[0]]))
        with pytest.raises(ValueError, match="needs 2 actions"):
            env.send(np.array([0]), ids)
        env.send(np.array([1, 1]), ids)  # nothing above changed the state: this is accepted
        for _ in range(2):
            env.recv()
        with pytest.raises(RuntimeError, match=r"recv\(\) returns batch_size=2 envs and 0 are in flight"):
            env.recv()
        obs, *_ = env.step(np.ones(N, dtype=np.int64))  # every env answered: the gymnasium API again
        assert obs.shape == (N, 4, 84, 84)
    finally:
        env.close()


@pytest.mark.parametrize(
    ("game", "kwargs", "message"),
    [
        (GAME, dict(batch_size=0), "batch_size must be an int from 1 to num_envs=4"),
        (GAME, dict(batch_size=5), "batch_size must be an int from 1 to num_envs=4"),
        (GAME, dict(batch_size=2, shards=2), "leave shards out"),
        (GAME, dict(batch_size=2, backend="subprocess"), "native ALE backend only"),
        (GAME, dict(batch_size=2, autoreset_mode="SameStep"), "needs autoreset_mode=NEXT_STEP"),
        ("RetroKit/Airstriker-Genesis-v0", dict(batch_size=2), "native ALE backend only"),
    ],
)
def test_bad_batch_arguments(game, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make_vec(game, num_envs=N, **kwargs)
