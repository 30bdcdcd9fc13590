"""gym.make_vec over RetroKit/ IDs: every backend equals N independent gym.make envs.

Equivalence runs use ``noop_max=0`` because the native backend's no-op random generator is ale-py's, not
the env's ``np_random`` (the no-op *count distribution* is checked separately). One documented native
difference is allowed: on the step where the real game ends before the last skipped frame, ale-py returns
the previous step's frame, while ``MaxAndSkip`` returns the max of the last two frames produced; only that
final observation of a game over (terminated=True, never bootstrapped) is excluded from the frame check.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from retro_atari_kit.vector import make_vector_env, resolve_backend

BACKENDS = ["native", "subprocess", "inprocess"]


@pytest.fixture(name="assert_same")
def assert_same_fixture(assert_env_step):
    """``assert_same(venv, first, steps, actions, backend) -> (games, life-loss ends)``: the vector env
    played with ``actions`` equals the reference run (``reference_run``'s ``first``, ``steps``)."""

    def assert_same(venv, first, steps, actions, backend):
        obs, _ = venv.reset(seed=7)
        np.testing.assert_array_equal(obs, first)
        games = lives_ends = 0
        for t, action in enumerate(actions):
            obs, rewards, terms, truncs, info = venv.step(action)
            assert obs.dtype == np.uint8 and obs.shape == venv.observation_space.shape
            for i, ref in enumerate(steps[t]):
                r_term, r_info = ref[2], ref[4]
                game_over_frame = backend == "native" and r_term and "episode" in r_info
                step = (obs, rewards, terms, truncs, info)
                if assert_env_step(step, i, ref, f"step {t} env {i}", check_frame=not game_over_frame):
                    games += 1
                elif r_term:
                    lives_ends += 1
        return games, lives_ends

    return assert_same


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_equals_gym_make_breakout(reference_run, assert_same, backend):
    """Life losses (episodic life, continue + FIRE), game overs, fire reset, clipping, true scores."""
    kwargs = {"noop_max": 0}
    actions = np.random.default_rng(0).integers(0, 4, size=(500, 2))
    first, steps = reference_run("RetroKit/Breakout-v0", 2, 7, actions, **kwargs)
    venv = gym.make_vec("RetroKit/Breakout-v0", num_envs=2, backend=backend, **kwargs)
    try:
        assert venv.backend == backend
        games, life_ends = assert_same(venv, first, steps, actions, backend)
    finally:
        venv.close()
    assert games >= 2 and life_ends >= 4  # the run really covered both kinds of episode end


@pytest.mark.parametrize("backend", ["native", "subprocess"])
def test_backend_equals_gym_make_pong_truncation_and_options(reference_run, assert_same, backend):
    """Time limit truncation, no clipping, no episodic life, frame_stack=2, one env."""
    kwargs = {
        "noop_max": 0,
        "max_episode_steps": 60,
        "clip_reward": False,
        "frame_stack": 2,
        "terminal_on_life_loss": False,
    }
    actions = np.random.default_rng(1).integers(0, 6, size=(130, 1))
    first, steps = reference_run("RetroKit/Pong-v0", 1, 7, actions, **kwargs)
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=1, backend=backend, **kwargs)
    try:
        assert venv.single_observation_space.shape == (2, 84, 84)
        games, _ = assert_same(venv, first, steps, actions, backend)
    finally:
        venv.close()
    assert games == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_step_autoreset_final_obs(reference_run, backend):
    """SAME_STEP: the ending step returns the reset obs; final_obs/final_info hold the last ones."""
    kwargs = {"noop_max": 0, "max_episode_steps": 10}
    actions = np.zeros((12, 2), dtype=np.int64)
    first, steps = reference_run("RetroKit/Pong-v0", 2, 7, actions, **kwargs)
    venv = make_vector_env(
        "Pong", num_envs=2, backend=backend, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs
    )
    try:
        assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        venv.reset(seed=7)
        for t in range(8):  # fire reset took 2 of the 10 steps
            obs, _, terms, truncs, info = venv.step(actions[t])
        assert truncs.all() and not terms.any()
        for i in range(2):
            np.testing.assert_array_equal(info["final_obs"][i], steps[7][i][0])
            assert info["final_info"]["episode"]["l"][i] == 10
            assert "episode" not in info  # gymnasium's layout: the ending step's info is in final_info
            np.testing.assert_array_equal(obs[i], steps[8][i][0])  # the reference reset obs
        obs, _, terms, truncs, info = venv.step(actions[8])
        assert not truncs.any() and "_episode" not in info
        for i in range(2):
            np.testing.assert_array_equal(obs[i], steps[9][i][0])
    finally:
        venv.close()


@pytest.mark.parametrize("backend", ["subprocess", "inprocess"])
def test_per_rank_seeds_with_noops(backend):
    """reset(seed=s) seeds env i with s + i: equals gym.make(...).reset(seed=s + i), no-ops included."""
    venv = gym.make_vec("RetroKit/Breakout-v0", num_envs=3, backend=backend)
    try:
        obs, info = venv.reset(seed=11)
    finally:
        venv.close()
    for i in range(3):
        env = gym.make("RetroKit/Breakout-v0")
        ref, ref_info = env.reset(seed=11 + i)
        env.close()
        np.testing.assert_array_equal(obs[i], ref)
        assert info["episode_frame_number"][i] == ref_info["episode_frame_number"]


def test_native_noop_distribution_and_determinism():
    """Native no-ops: 1..noop_max frames (the kit's range, not ale-py's 0..n-1); seeded runs repeat."""
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=4, backend="native", fire_reset=False, noop_max=5)
    counts = set()
    try:
        for seed in range(0, 40, 4):
            _, info = venv.reset(seed=seed)
            counts.update(int(c) for c in info["episode_frame_number"])
        first, _ = venv.reset(seed=3)
        again, _ = venv.reset(seed=3)
    finally:
        venv.close()
    assert counts <= set(range(1, 6)) and len(counts) >= 4
    np.testing.assert_array_equal(first, again)


def test_auto_backend_choice():
    assert resolve_backend("Pong") == "native"
    assert resolve_backend("Pong", render_mode="rgb_array") == "subprocess"
    assert resolve_backend("Pong-Atari2600") == "subprocess"
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=1)
    assert venv.backend == "native"
    venv.close()


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="backend must be one of"):
        gym.make_vec("RetroKit/Pong-v0", num_envs=1, backend="threads")
    with pytest.raises(ValueError, match="render_mode"):
        gym.make_vec("RetroKit/Pong-v0", num_envs=1, backend="native", render_mode="rgb_array")
    with pytest.raises(ValueError, match="one emulator per process"):
        gym.make_vec("RetroKit/Pong-Atari2600-v0", num_envs=1, backend="native")
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'noop_maxx'"):
        gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess", noop_maxx=3)
    with pytest.raises(ValueError, match="num_envs"):
        make_vector_env("Pong", num_envs=0)
    with pytest.raises(ValueError, match="autoreset_mode"):
        make_vector_env("Pong", num_envs=1, autoreset_mode="sometimes")


def test_vector_entry_point_with_a_backend_and_rgb_render_fallback():
    venv = gym.make_vec(
        "RetroKit/Pong-v0",
        num_envs=1,
        vectorization_mode="vector_entry_point",
        backend="inprocess",
        render_mode="rgb_array",
    )
    try:
        venv.reset(seed=0)
        frames = venv.render()
        assert frames[0].shape == (210, 160, 3)
        assert venv.spec.id == "RetroKit/Pong-v0"
    finally:
        venv.close()
    venv.close()  # idempotent


def test_what_vectorization_mode_gives_as_the_docs_say():
    # docs/vectorization.md, "vectorization_mode and backend"
    venv = gym.make_vec(
        "RetroKit/Pong-v0", num_envs=2
    )  # None: the ID's vector entry point, the kit's backend
    try:
        assert venv.backend == "native" and venv.observation_space.shape == (2, 4, 84, 84)
    finally:
        venv.close()
    venv = gym.make_vec(
        "RetroKit/Pong-v0", num_envs=2, vectorization_mode="vector_entry_point", backend="inprocess"
    )
    try:
        assert venv.backend == "inprocess"
    finally:
        venv.close()
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, vectorization_mode="sync")
    try:  # gymnasium's own vectoriser over gym.make envs: the same observations, the kit's stack in each
        assert isinstance(venv, gym.vector.SyncVectorEnv)
        assert venv.observation_space.shape == (2, 4, 84, 84) and venv.observation_space.dtype == np.uint8
    finally:
        venv.close()
    for mode in (
        "native",
        "subprocess",
        "inprocess",
    ):  # not backends to gymnasium: refused by gymnasium itself
        with pytest.raises(ValueError, match=f"Invalid vectorization mode: '{mode}'"):
            gym.make_vec("RetroKit/Pong-v0", num_envs=2, vectorization_mode=mode)
    with pytest.raises(ValueError) as info:  # a direct call of the entry point says what to pass instead
        make_vector_env("Pong", num_envs=2, vectorization_mode="native")
    assert str(info.value) == (
        "vectorization_mode='native' is gym.make_vec's argument, not a backend: choose the kit's backend "
        "with backend= (one of auto, native, subprocess, inprocess)"
    )
