"""The native ALE backend's batched driving: the rule functions it shares with the wrappers, its rules
kernel, and whole runs of many envs against ``gym.make`` (real emulator throughout).

Runs use ``noop_max=0`` (the native no-op generator is ale-py's, see test_vector.py) and allow the one
documented native difference: the frame of a game over that ends mid-skip.
"""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest

import retro_atari_kit  # noqa: F401
from retro_atari_kit.envs.ale import validate_ale_kwargs
from retro_atari_kit.vector._stacked import StackedVectorEnv
from retro_atari_kit.vector.native_ale import NativeDriver, finish_steps_kernel
from retro_atari_kit.wrappers.clip_reward import clip_to_sign
from retro_atari_kit.wrappers.episodic_life import continue_or_reset, life_loss_step
from retro_atari_kit.wrappers.fire_reset import fire_start

# -- rule functions: one statement, scalars (wrappers) and arrays (native backend) --------------------
LIFE_CASES = [
    # lives, previous, terminated, truncated -> terminated for training, continue the game on reset
    (3, 4, False, False, True, True),  # life lost mid-game
    (0, 1, True, False, True, False),  # last life: the game itself ended, reset it
    (2, 3, False, True, True, False),  # life lost on the truncating step: no continuation
    (4, 4, False, False, False, False),  # nothing happened
    (5, 4, False, False, False, False),  # lives gained
    (3, 0, False, False, False, False),  # first step after a reset (no previous count)
    (4, 4, True, False, True, False),  # game over without a life loss
]


def test_life_loss_step_scalars_and_arrays_agree():
    for lives, previous, term, trunc, want_term, want_continue in LIFE_CASES:
        got_term, got_continue = life_loss_step(lives, previous, term, trunc)
        assert (bool(got_term), bool(got_continue)) == (want_term, want_continue), (lives, previous)
        assert type(got_term) is bool  # the wrapper returns a plain bool, as before
    columns = [np.array(column) for column in zip(*LIFE_CASES, strict=True)]
    got_term, got_continue = life_loss_step(*columns[:4])
    np.testing.assert_array_equal(got_term, columns[4])
    np.testing.assert_array_equal(got_continue, columns[5])


def test_clip_to_sign_scalars_and_arrays():
    assert [clip_to_sign(r) for r in (-7.0, 0.0, 0.25, 12)] == [-1.0, 0.0, 1.0, 1.0]
    assert type(clip_to_sign(3)) is float
    out = clip_to_sign(np.array([-7, 0, 3], dtype=np.int32))
    assert out.dtype == np.float64 and out.tolist() == [-1.0, 0.0, 1.0]


@pytest.mark.parametrize("episodic", [True, False])
@pytest.mark.parametrize("clip", [True, False])
def test_finish_steps_kernel_follows_the_wrappers_rules(episodic, clip):
    """The native backend's one-call rules: TimeLimit, the true-score sums, life_loss_step, clip_to_sign."""
    n = len(LIFE_CASES)
    lives_now, previous, term, trunc = (np.array(c) for c in list(zip(*LIFE_CASES, strict=True))[:4])
    raw_reward = np.array([-7.0, 0.0, 0.25, 12.0, 3.0, -1.0, 0.0])
    elapsed = np.array([0, 4, 9, 2, 8, 0, 1])  # max_steps=10: env 2 reaches it on this step
    score, length = np.full(n, 5.0), np.full(n, 3)
    lives, continue_game = previous.copy(), np.zeros(n, dtype=bool)
    rewards, terms, truncs, game_over = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    envs = np.array([0, 1, 2, 3, 4, 6])  # env 5 did not step: nothing of it changes
    floats = np.stack([score, raw_reward])
    ints = np.stack([elapsed, length, lives, lives_now])
    flags = np.stack([term, trunc, continue_game, game_over])
    ended = finish_steps_kernel()(envs, floats, ints, flags, 10, episodic, clip, rewards, terms, truncs)
    score, _, elapsed, length, lives, _ = (*floats, *ints)
    continue_game, game_over = flags[2], flags[3]
    for i in range(n):
        stepped = i in envs
        want_trunc = bool(trunc[i]) or (stepped and elapsed[i] >= 10)
        assert elapsed[i] == [0, 4, 9, 2, 8, 0, 1][i] + stepped
        assert score[i] == 5.0 + (raw_reward[i] if stepped else 0.0) and length[i] == 3 + stepped
        if not stepped:
            assert (rewards[i], terms[i], truncs[i], game_over[i], lives[i]) == (
                0,
                False,
                False,
                False,
                previous[i],
            )
            continue
        assert game_over[i] == bool(term[i] or want_trunc)
        want_term, want_continue = bool(term[i]), False
        if episodic:
            want_term, want_continue = life_loss_step(
                int(lives_now[i]), int(previous[i]), want_term, want_trunc
            )
            assert lives[i] == lives_now[i]
        assert (bool(terms[i]), bool(truncs[i]), bool(continue_game[i])) == (
            want_term,
            want_trunc,
            want_continue,
        )
        assert rewards[i] == (clip_to_sign(float(raw_reward[i])) if clip else raw_reward[i])
    assert ended == int(game_over.sum())


def _scripted(ends: list[bool]):
    """A step function whose k-th call ends the episode if ends[k]; records its actions and resets."""
    calls = []

    def step(action):
        calls.append(("step", action))
        ended = ends[len([c for c in calls if c[0] == "step"]) - 1]
        return f"obs{len(calls)}", 5.0, ended, False, {"n": len(calls)}

    def reset():
        calls.append(("reset", None))
        return f"obs{len(calls)}", {"n": len(calls)}

    return calls, step, reset


def test_fire_start_and_continue_or_reset_follow_the_wrappers_rules():
    calls, step, reset = _scripted([False, False])
    assert fire_start(step, reset) == ("obs2", {"n": 2})
    assert calls == [("step", 1), ("step", 2)]
    calls, step, reset = _scripted([True, True])  # both presses end the episode: reset after each
    assert fire_start(step, reset) == ("obs4", {"n": 4})
    assert calls == [("step", 1), ("reset", None), ("step", 2), ("reset", None)]

    calls, step, reset = _scripted([False])
    assert continue_or_reset(True, None, lambda: step(0), reset) == ("obs1", {"n": 1})
    assert calls == [("step", 0)]
    calls, step, reset = _scripted([True])  # the NOOP ended the game: reset it
    assert continue_or_reset(True, None, lambda: step(0), reset) == ("obs2", {"n": 2})
    calls, step, reset = _scripted([False])  # a seed always resets
    assert continue_or_reset(True, 3, lambda: step(0), reset) == ("obs1", {"n": 1})
    assert calls == [("reset", None)]


# -- whole runs ---------------------------------------------------------------------------------------
def _native(game: str, num_envs: int, autoreset: str = "NextStep", **kwargs):
    cfg = validate_ale_kwargs(game, kwargs)
    return StackedVectorEnv(NativeDriver(game, num_envs, cfg), cfg["frame_stack"], autoreset, "native")


@pytest.mark.parametrize("kwargs", [{}, {"grayscale": False, "crop_score": True}])
def test_many_envs_with_resets_between_steps_equal_gym_make(reference_run, assert_env_step, kwargs):
    """Five Breakout envs lose lives at different steps, so most steps mix envs that reset (NOOP + FIRE
    + action 2, or a new game) with envs that step; every frame, reward, flag, life count and true score
    equals gym.make's."""
    kwargs = {"noop_max": 0, **kwargs}
    actions = np.random.default_rng(5).integers(0, 4, size=(400, 5))
    first, steps = reference_run("RetroKit/Breakout-v0", 5, 7, actions, **kwargs)
    venv = _native("Breakout", 5, **kwargs)
    mixed = games = 0
    try:
        obs, _ = venv.reset(seed=7)
        np.testing.assert_array_equal(obs, first)
        for t, action in enumerate(actions):
            resetting = venv._autoreset.copy()
            obs, rewards, terms, truncs, info = venv.step(action)
            mixed += bool(resetting.any() and not resetting.all())
            for i, ref in enumerate(steps[t]):
                r_term, r_info = ref[2], ref[4]
                game_over_frame = r_term and "episode" in r_info  # the documented frame difference
                step = (obs, rewards, terms, truncs, info)
                games += assert_env_step(step, i, ref, f"step {t} env {i}", check_frame=not game_over_frame)
                assert info["episode_frame_number"][i] == r_info["episode_frame_number"]
    finally:
        venv.close()
    assert mixed >= 20 and games >= 1  # the run really mixed resets with steps, and ended real games


def test_same_seed_same_run_whatever_the_thread_timing():
    """No-ops and all: two native vector envs with one seed and the same actions stay identical, however the
    emulator threads were scheduled."""
    actions = np.random.default_rng(2).integers(0, 4, size=(300, 6))
    runs = []
    for _ in range(2):
        venv = _native("Breakout", 6)
        try:
            obs, _ = venv.reset(seed=11)
            trace = [obs]
            for action in actions:
                obs, rewards, terms, truncs, info = venv.step(action)
                trace += [obs, rewards, terms, truncs, info["lives"]]
        finally:
            venv.close()
        runs.append(trace)
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.timeout(60)
def test_out_of_range_action_raises_instead_of_hanging():
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="native")
    try:
        venv.reset(seed=0)
        with pytest.raises(ValueError, match=r"in \[0, 5\] per env; env 1's action is 17 \(out of range\)"):
            venv.step(np.array([0, 17]))
        with pytest.raises(ValueError, match=r"env 0's action is -1 \(out of range\)"):
            venv.step(np.array([-1, 0]))
        obs, *_ = venv.step(np.array([0, 1]))  # still usable
        assert obs.shape == (2, 4, 84, 84)
    finally:
        venv.close()


def test_one_process_starts_no_python_thread():
    """In one process the calling thread sends, receives and warps: the only threads are ale-py's."""
    before = threading.active_count()
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=3, backend="native", shards=1)
    try:
        venv.reset(seed=0)
        venv.step(np.zeros(3, dtype=np.int64))
        assert threading.active_count() == before
    finally:
        venv.close()
