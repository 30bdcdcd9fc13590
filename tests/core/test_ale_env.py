"""RetroKit/<Game>-v0: registration, spaces, kwargs, checkers, seeding (real ALE)."""

import importlib
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import retro_atari_kit
from retro_atari_kit.catalog import ale_games

CHECKED_GAMES = ["Pong", "Breakout", "MsPacman", "SpaceInvaders", "MontezumaRevenge"]


def test_every_ale_rom_is_registered():
    import ale_py.roms

    from retro_atari_kit.catalog.ale import MULTIPLAYER_ONLY_ROMS

    roms = set(ale_py.roms.get_all_rom_ids()) - MULTIPLAYER_ONLY_ROMS
    assert len(roms) >= 100
    ids = {game.env_id for game in ale_games()}
    assert len(ids) == len(roms)
    for name in ["Pong", "Breakout", "MsPacman", "SpaceInvaders", "MontezumaRevenge", "Seaquest"]:
        assert f"RetroKit/{name}-v0" in gym.registry


@pytest.mark.parametrize("env_id", sorted(g.env_id for g in ale_games()))
def test_every_id_makes_and_resets(env_id):
    env = gym.make(env_id, noop_max=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    env.close()


@pytest.mark.parametrize("game", CHECKED_GAMES)
def test_gymnasium_and_sb3_checkers_pass(game):
    # The checkers warn about any doubtful space, dtype or API use; only gymnasium's notice that the
    # env is wrapped is expected (the stack *is* the env).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(gym.make(f"RetroKit/{game}-v0"), skip_render_check=True)
        sb3_check_env(gym.make(f"RetroKit/{game}-v0"), warn=True)
    unexpected = [str(w.message) for w in caught if "different from the unwrapped" not in str(w.message)]
    assert unexpected == []


def test_observation_space_and_dtype():
    env = gym.make("RetroKit/Pong-v0")
    assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    obs, _ = env.reset(seed=0)
    for _ in range(10):
        obs, reward, *_ = env.step(env.action_space.sample())
        assert obs.dtype == np.uint8 and obs.shape == (4, 84, 84)
        assert isinstance(reward, float)


def test_uint8_at_every_layer_boundary():
    env = gym.make("RetroKit/Breakout-v0")
    env.reset(seed=0)
    layer = env
    seen = []
    while isinstance(layer, gym.Wrapper):
        assert layer.observation_space.dtype == np.uint8, type(layer).__name__
        seen.append(type(layer).__name__)
        layer = layer.env
    assert layer.observation_space.dtype == np.uint8
    assert {
        "NoopReset",
        "MaxAndSkip",
        "TrueScoreStatistics",
        "EpisodicLife",
        "FireReset",
        "WarpFrame",
        "ClipReward",
        "FrameStack",
    } <= set(seen)


def test_same_seed_same_trajectory_and_different_seeds_differ():
    def rollout(seed):
        env = gym.make("RetroKit/Breakout-v0")
        obs, _ = env.reset(seed=seed)
        frames = [obs]
        for a in np.random.default_rng(0).integers(4, size=200):
            obs, r, term, trunc, _ = env.step(int(a))
            frames.append(obs)
            if term or trunc:
                frames.append(env.reset()[0])
        return np.stack(frames)

    np.testing.assert_array_equal(rollout(7), rollout(7))
    assert not np.array_equal(rollout(7), rollout(8))


def test_different_seeds_give_different_noop_counts():
    from retro_atari_kit.wrappers import NoopReset

    env = gym.make("RetroKit/Pong-v0")
    counts = set()
    for seed in range(20):
        env.reset(seed=seed)
        counts.add(env.get_wrapper_attr("last_noop_count"))
    assert len(counts) > 5
    assert all(1 <= c <= 30 for c in counts)
    assert isinstance(NoopReset, type)


def test_kwargs_shape_the_stack():
    assert gym.make("RetroKit/Pong-v0", frame_stack=1).reset(seed=0)[0].shape == (1, 84, 84)
    assert gym.make("RetroKit/Pong-v0", grayscale=False).reset(seed=0)[0].shape == (12, 84, 84)
    assert gym.make("RetroKit/Pong-v0", screen_size=64, frame_stack=2).reset(seed=0)[0].shape == (2, 64, 64)
    rgb = gym.make("RetroKit/Pong-v0", render_mode="rgb_array")
    rgb.reset(seed=0)
    frame = rgb.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8
    full = gym.make("RetroKit/Pong-v0", full_action_space=True)
    assert full.action_space.n == 18
    unclipped = gym.make("RetroKit/Pong-v0", clip_reward=False, terminal_on_life_loss=False)
    assert "ClipReward" not in str(unclipped) and "EpisodicLife" not in str(unclipped)


def test_crop_score_true_uses_catalog_box_and_explicit_box_works():
    assert gym.make("RetroKit/Pong-v0", crop_score=True).reset(seed=0)[0].shape == (4, 84, 84)
    assert gym.make("RetroKit/Pong-v0", crop_score=(30, 190, 0, 160)).reset(seed=0)[0].shape == (4, 84, 84)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"frame_skp": 4},
            TypeError,
            "got an unexpected keyword argument 'frame_skp' (did you mean 'frame_skip'?); allowed: clip",
        ),
        ({"frame_skip": 0}, ValueError, "frame_skip must be an int >= 1"),
        ({"frame_skip": 2.5}, TypeError, "frame_skip must be an int >= 1"),
        ({"noop_max": -1}, ValueError, "noop_max must be an int >= 0"),
        ({"fire_reset": "yes"}, ValueError, "fire_reset must be one of 'auto', True, False"),
        ({"sticky_actions": 1.5}, ValueError, "sticky_actions must be a probability in [0, 1]"),
        ({"grayscale": "no"}, TypeError, "grayscale must be True or False"),
        ({"render_mode": "ansi"}, ValueError, "render_mode must be one of None, 'rgb_array', 'human'"),
        ({"crop_score": (1, 2, 3)}, TypeError, "crop_score must be False, True or a box"),
        ({"crop_score": (0, 300, 0, 160)}, ValueError, "outside the 210x160 screen"),
    ],
)
def test_bad_kwargs_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error) as excinfo:
        gym.make("RetroKit/Pong-v0", **kwargs)
    assert message in str(excinfo.value)


def test_crop_score_true_without_known_box_names_explicit_form():
    with pytest.raises(ValueError, match=r"crop_score=\(top, bottom, left, right\)"):
        gym.make("RetroKit/Tennis-v0", crop_score=True)


def test_unknown_id_suggests_the_right_one():
    with pytest.raises(gym.error.NameNotFound, match="Did you mean: `Pong`"):
        gym.make("RetroKit/Pnog-v0")


def test_register_twice_is_harmless():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        retro_atari_kit.register_all()
        importlib.reload(retro_atari_kit)
    assert "RetroKit/Pong-v0" in gym.registry


def test_module_prefix_works_in_a_fresh_interpreter():
    code = (
        "import gymnasium as gym; e = gym.make('retro_atari_kit:RetroKit/Pong-v0'); "
        "o, _ = e.reset(seed=0); print(o.shape, o.dtype)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "(4, 84, 84) uint8" in out.stdout


def test_max_episode_steps_truncates_and_next_reset_starts_a_new_game():
    env = gym.make("RetroKit/Breakout-v0", max_episode_steps=20, noop_max=0)
    env.reset(seed=0)
    for _ in range(20):
        _, _, term, trunc, info = env.step(0)
        if term:
            break
    assert trunc and not term
    ale = env.unwrapped.ale
    frames_played = ale.getEpisodeFrameNumber()
    env.reset()
    assert ale.getEpisodeFrameNumber() < frames_played, "a truncated episode restarts the game"


def _first_cut(env, steps: int):
    env.reset(seed=0)
    for _ in range(steps):
        _, _, term, trunc, info = env.step(0)
        if term or trunc:
            break
    env.close()
    assert trunc and not term
    return info.get("episode")


def test_make_env_puts_max_episode_steps_inside_the_stack():
    # gym.make keeps max_episode_steps for its own TimeLimit around the whole stack: the cut game is never
    # reported. make_env gives it to the kit's stack, below the true-score statistics: the cut game is.
    from retro_atari_kit.registration import make_env

    assert _first_cut(gym.make("RetroKit/Pong-v0", max_episode_steps=30), 30) is None
    env = make_env("retro_atari_kit:RetroKit/Pong-v0", max_episode_steps=30)
    assert env.spec.kwargs["max_episode_steps"] == 30
    again = gym.make(env.spec)  # the spec rebuilds an env that cuts and reports the game the same way
    for made in (env, again):
        game = _first_cut(made, 30)
        assert game is not None and game["l"] == 30


def test_bad_actions_and_seeds_are_one_line_and_change_nothing():
    """The ALE single env checks like every vector backend and the retro env (envs/_validate.py): a refused
    call raises before any layer runs, so the env then plays exactly like a twin that never saw it."""
    env, twin = gym.make("RetroKit/Breakout-v0"), gym.make("RetroKit/Breakout-v0")
    first, _ = env.reset(seed=np.int64(4))
    np.testing.assert_array_equal(first, twin.reset(seed=4)[0])
    for bad in (4, -1, 1.0, None, "1", np.array([1, 2])):
        with pytest.raises(ValueError, match=r"^action must be an int in \[0, 3\]") as err:
            env.step(bad)
        assert "\n" not in str(err.value)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            env.reset(seed=bad)
    env.reset(seed=4)  # the refused reset changed nothing: a fresh start with the same seed
    for action in [1, 2, 3, 0] * 20:
        a, b = env.step(action), twin.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
    env.close()
    twin.close()
