"""Shared helpers of the core tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from retro_atari_kit.envs.ale import make_ale_env


def make_reference(env_id, **kwargs):
    """``gym.make``; with ``max_episode_steps`` the kit's own stack function instead, because
    ``gym.make`` intercepts that kwarg and puts gymnasium's TimeLimit *outside* the stack (no true-score
    ``info["episode"]`` on truncation), while ``make_vec`` passes it to the stack (TimeLimit below the
    true-score statistics, as docs/envs.md describes)."""
    if "max_episode_steps" in kwargs:
        game = gym.spec(env_id).kwargs["game"]
        return make_ale_env(game, **kwargs)
    return gym.make(env_id, **kwargs)


def reference_run(env_id, num_envs, seed, actions, **kwargs):
    """N independent reference envs, reset by hand with gymnasium's NEXT_STEP autoreset rule."""
    envs = [make_reference(env_id, **kwargs) for _ in range(num_envs)]
    first = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    steps = []
    done = np.zeros(num_envs, dtype=bool)
    for action in actions:
        row = []
        for i, env in enumerate(envs):
            if done[i]:
                obs, info = env.reset()
                row.append((obs, 0.0, False, False, info))
            else:
                row.append(env.step(int(action[i])))
        done = np.array([r[2] or r[3] for r in row])
        steps.append(row)
    for env in envs:
        env.close()
    return first, steps


def assert_env_step(step: tuple, i: int, ref: tuple, where: str, check_frame: bool = True) -> bool:
    """Env ``i`` of a vector env's ``step`` result equals the reference env's step ``ref``: frame (unless
    ``check_frame`` is False), reward, flags, lives and the true score. True when the step ended a game."""
    obs, rewards, terms, truncs, info = step
    r_obs, r_rew, r_term, r_trunc, r_info = ref
    if check_frame:
        np.testing.assert_array_equal(obs[i], r_obs, err_msg=where)
    assert (rewards[i], terms[i], truncs[i]) == (r_rew, r_term, r_trunc), where
    assert info["lives"][i] == r_info["lives"], where
    has_episode = "_episode" in info and bool(info["_episode"][i])
    assert has_episode == ("episode" in r_info), where
    if has_episode:
        assert info["episode"]["r"][i] == r_info["episode"]["r"], where
        assert info["episode"]["l"][i] == r_info["episode"]["l"], where
    return has_episode


@pytest.fixture(name="assert_env_step")
def assert_env_step_fixture():
    """:func:`assert_env_step`."""
    return assert_env_step


@pytest.fixture(name="reference_run")
def reference_run_fixture():
    """:func:`reference_run`: the oracle every vector backend is compared with."""
    return reference_run


@pytest.fixture
def sdl_dummy_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """SDL's dummy video and audio drivers while the test runs: a ``"human"`` window (gymnasium's checkers
    open one) draws nowhere and plays no sound, with or without a display. Asked for by the tests that open
    a window in this process (``pytestmark`` of a module, or one test's ``usefixtures``); every other test
    sees the environment the machine gave the suite, so a test that opens a window without asking fails
    where it would fail for a user (tests/core/test_env_checkers.py checks the no-display machine)."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")
