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


@pytest.fixture(name="reference_run")
def reference_run_fixture():
    """:func:`reference_run`: the oracle every vector backend is compared with."""
    return reference_run
