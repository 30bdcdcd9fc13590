"""Autoreset modes of the kit's vector envs against gymnasium's own ``SyncVectorEnv`` over the same stacks.

The oracle is gymnasium itself: ``SyncVectorEnv`` over N per-env stacks (``make_ale_env``, which keeps the
time limit below the true-score statistics exactly as ``make_vec`` does), stepped with the same seeds and
actions. Every info key is compared, ``_``-prefixed masks included, with values and dtypes; only the wall
time ``episode["t"]`` differs between runs. ``noop_max=0``: the native backend's no-op generator is
ale-py's (see tests/core/test_vector.py); the seeded masked-reset test uses no-ops on the per-env backends.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from retro_atari_kit.envs.ale import make_ale_env

BACKENDS = ["native", "subprocess", "inprocess"]
BREAKOUT = {"noop_max": 0, "max_episode_steps": 40}


def oracle(game: str, num_envs: int, mode: AutoresetMode, **kwargs) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: make_ale_env(game, **kwargs) for _ in range(num_envs)], autoreset_mode=mode)


def assert_same_info(kit: dict, ref: dict, where: str, native_game_over: np.ndarray) -> None:
    """The same keys at every level, the same masks, values and dtypes (wall time only by mask)."""
    assert sorted(kit) == sorted(ref), f"{where}: keys {sorted(kit)} != gymnasium's {sorted(ref)}"
    for key, ref_value in ref.items():
        value = kit[key]
        if isinstance(ref_value, dict):
            assert isinstance(value, dict), f"{where}.{key}"
            assert_same_info(value, ref_value, f"{where}.{key}", native_game_over)
            continue
        assert value.dtype == ref_value.dtype and value.shape == ref_value.shape, f"{where}.{key}"
        if key == "t":
            continue
        if key == "final_obs":  # gymnasium keeps one object per env (None where no episode ended)
            for i, (obs, ref_obs) in enumerate(zip(value, ref_value, strict=True)):
                if ref_obs is None or native_game_over[i]:
                    # the documented native difference: the frame of a game over ending mid-skip
                    assert (obs is None) == (ref_obs is None), f"{where}.{key}[{i}]"
                    continue
                assert obs.dtype == ref_obs.dtype, f"{where}.{key}[{i}]"
                np.testing.assert_array_equal(obs, ref_obs, err_msg=f"{where}.{key}[{i}]")
            continue
        np.testing.assert_array_equal(value, ref_value, err_msg=f"{where}.{key}")


def step_both(ref: SyncVectorEnv, kit, action: np.ndarray, t: int):
    """One step of gymnasium's env and the kit's: the same observations, rewards and flags; both results."""
    r_obs, r_rew, r_term, r_trunc, r_info = ref.step(action)
    obs, rew, term, trunc, info = kit.step(action)
    np.testing.assert_array_equal(obs, r_obs, err_msg=f"step {t}")
    np.testing.assert_array_equal(rew, r_rew)
    np.testing.assert_array_equal(term, r_term)
    np.testing.assert_array_equal(trunc, r_trunc)
    return (obs, rew, term, trunc, info), r_info


def game_over(backend: str, terms: np.ndarray, info: dict) -> np.ndarray:
    final = info.get("final_info", {})
    ended = final.get("_episode", np.zeros_like(terms))
    return terms & ended if backend == "native" else np.zeros_like(terms)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_step_info_layout_equals_gymnasium(backend):
    """SAME_STEP: the top level holds the reset info; the ending step's info (and its true score) is only
    under ``final_info``, as gymnasium lays it out. Covers life losses (no score) and game ends."""
    actions = np.random.default_rng(3).integers(0, 4, size=(150, 2))
    ref = oracle("Breakout", 2, AutoresetMode.SAME_STEP, **BREAKOUT)
    kit = gym.make_vec(
        "RetroKit/Breakout-v0", num_envs=2, backend=backend, autoreset_mode="SameStep", **BREAKOUT
    )
    ends = {"life": 0, "game": 0}
    try:
        r_obs, r_info = ref.reset(seed=7)
        obs, info = kit.reset(seed=7)
        np.testing.assert_array_equal(obs, r_obs)
        assert_same_info(info, r_info, "reset", np.zeros(2, dtype=bool))
        for t, action in enumerate(actions):
            (obs, rew, term, trunc, info), r_info = step_both(ref, kit, action, t)
            assert_same_info(info, r_info, f"step {t}", game_over(backend, term, info))
            assert "episode" not in info  # the true score is not repeated at the top level
            if "final_info" in r_info:
                scored = r_info["final_info"].get("_episode", np.zeros(2, dtype=bool))
                ends["game"] += int(scored.sum())
                ends["life"] += int((r_info["_final_info"] & ~scored).sum())
    finally:
        kit.close()
        ref.close()
    assert ends["game"] >= 2 and ends["life"] >= 2  # both kinds of episode end were compared


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_autoreset_equals_gymnasium(backend):
    """DISABLED: no env resets by itself; ``reset(options={"reset_mask": done})`` resets only those."""
    actions = np.random.default_rng(4).integers(0, 4, size=(150, 3))
    ref = oracle("Breakout", 3, AutoresetMode.DISABLED, **BREAKOUT)
    kit = gym.make_vec(
        "RetroKit/Breakout-v0", num_envs=3, backend=backend, autoreset_mode="Disabled", **BREAKOUT
    )
    masked_resets = 0
    try:
        assert kit.metadata["autoreset_mode"] == AutoresetMode.DISABLED
        r_obs, r_info = ref.reset(seed=7)
        obs, info = kit.reset(seed=7)
        np.testing.assert_array_equal(obs, r_obs)
        for t, action in enumerate(actions):
            (obs, rew, term, trunc, info), r_info = step_both(ref, kit, action, t)
            assert_same_info(info, r_info, f"step {t}", np.zeros(3, dtype=bool))
            done = term | trunc
            if done.any():
                # the ending step's own observation stays (no reset happened)...
                assert "final_obs" not in info
                r_obs, r_info = ref.reset(options={"reset_mask": done.copy()})
                obs, info = kit.reset(options={"reset_mask": done.copy()})
                # ...and a masked reset changes only the masked envs
                np.testing.assert_array_equal(obs, r_obs, err_msg=f"reset after step {t}")
                assert_same_info(info, r_info, f"reset after step {t}", np.zeros(3, dtype=bool))
                masked_resets += int(not done.all())
    finally:
        kit.close()
        ref.close()
    assert masked_resets >= 2


@pytest.mark.parametrize("backend", ["subprocess", "inprocess"])
def test_masked_reset_seeds_env_i_with_seed_plus_i(backend):
    """With a mask, an int seed still gives env ``i`` the seed ``seed + i`` (gymnasium's rule), so a
    masked reset of env 1 alone gives the observation of a reset of everything with that seed."""
    kwargs = {"noop_max": 30}
    ref = oracle("Pong", 3, AutoresetMode.NEXT_STEP, **kwargs)
    kit = gym.make_vec("RetroKit/Pong-v0", num_envs=3, backend=backend, **kwargs)
    try:
        ref.reset(seed=0)
        kit.reset(seed=0)
        for seed in (100, 200, 300):
            mask = np.array([False, True, True])
            r_obs, r_info = ref.reset(seed=seed, options={"reset_mask": mask})
            obs, info = kit.reset(seed=seed, options={"reset_mask": mask.copy()})
            np.testing.assert_array_equal(obs, r_obs, err_msg=f"seed {seed}")
            assert_same_info(info, r_info, f"seed {seed}", np.zeros(3, dtype=bool))
    finally:
        kit.close()
        ref.close()


def test_bad_reset_masks_raise_one_clear_error():
    kit = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="inprocess", autoreset_mode="Disabled")
    try:
        kit.reset(seed=0)
        message = r"options\['reset_mask'\] must be a numpy bool array of shape \(2,\); got "
        with pytest.raises(ValueError, match=message + "list"):
            kit.reset(options={"reset_mask": [True, False]})
        with pytest.raises(ValueError, match=message + r"ndarray of dtype int64 and shape \(2,\)"):
            kit.reset(options={"reset_mask": np.array([1, 0])})
        with pytest.raises(ValueError, match=message + r"ndarray of dtype bool and shape \(3,\)"):
            kit.reset(options={"reset_mask": np.ones(3, dtype=bool)})
        with pytest.raises(ValueError, match="selects no env"):
            kit.reset(options={"reset_mask": np.zeros(2, dtype=bool)})
    finally:
        kit.close()
