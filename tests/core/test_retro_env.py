"""RetroKit/<Game>-<System>-v0: the stable-retro stack on real emulators (Pong-Atari2600 via ale-py's ROM,
Airstriker-Genesis via stable-retro's bundled ROM). Every test closes its env, so the next one runs in this
process (a further env while one is open runs in a worker: tests/core/test_retro_worker.py)."""

import gc
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import stable_retro
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import retro_atari_kit
from retro_atari_kit.catalog import retro_game, retro_games
from retro_atari_kit.envs.retro import make_retro_env
from retro_atari_kit.envs.retro_worker import RetroWorkerEnv
from retro_atari_kit.wrappers import ACTION_SETS, StochasticFrameSkip

GAMES = ["Pong-Atari2600", "Airstriker-Genesis"]
BUTTON_COUNTS = {"Pong-Atari2600": 18, "Airstriker-Genesis": 126}  # stable-retro's discrete sets


def _actions(n, seed, count):
    return np.random.default_rng(seed).integers(0, n, size=count).tolist()


class ActionRecorder(gym.Wrapper):
    """Records every action the emulator receives (one per emulator frame)."""

    def __init__(self, env):
        super().__init__(env)
        self.applied = []

    def step(self, action):
        self.applied.append(int(action))
        return self.env.step(action)


def _raw_retro(game):
    return stable_retro.make(
        retro_game(game).folder, render_mode=None, use_restricted_actions=stable_retro.Actions.DISCRETE
    )


# --- registration ---------------------------------------------------------------------------------------


def test_every_stable_integration_is_registered_and_contrib_is_opt_in():
    stable = retro_games()
    assert len(stable) > 900
    for game in [
        "Pong-Atari2600",
        "Airstriker-Genesis",
        "SonicTheHedgehog-Genesis",
        "MortalKombatII-Genesis",
    ]:
        assert f"RetroKit/{game}-v0" in gym.registry
    assert all(g.env_id in gym.registry for g in stable)
    assert "RetroKit/SonicTheHedgehogCustomKevin-Genesis-v0" not in gym.registry
    retro_atari_kit.register_all(include=("contrib",))
    assert "RetroKit/SonicTheHedgehogCustomKevin-Genesis-v0" in gym.registry
    with pytest.raises(ValueError, match="contrib"):
        retro_atari_kit.register_all(include="contrb")


def test_import_starts_no_emulator_and_contrib_env_var_works():
    code = (
        "import sys, gymnasium as gym, retro_atari_kit\n"
        "assert 'stable_retro' not in sys.modules, 'stable_retro imported at import time'\n"
        "assert 'RetroKit/Pong-Atari2600-v0' in gym.registry\n"
        "assert 'RetroKit/SonicTheHedgehogCustomKevin-Genesis-v0' in gym.registry\n"
    )
    env = {"RETROKIT_RETRO_INTEGRATIONS": "contrib,experimental", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


# --- spaces and checkers --------------------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.usefixtures("sdl_dummy_driver")  # gymnasium's render check opens the "human" window
def test_gymnasium_and_sb3_checkers_pass(game):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(f"RetroKit/{game}-v0")
        gym_check_env(env)  # its render and close checks make further envs while this one is open
        env.close()
        env.close()
        env = gym.make(f"RetroKit/{game}-v0")
        sb3_check_env(env, warn=True)
        env.close()
    unexpected = [str(w.message) for w in caught if "different from the unwrapped" not in str(w.message)]
    assert unexpected == []


@pytest.mark.parametrize("game", GAMES)
def test_spaces_shapes_and_dtypes(game):
    env = gym.make(f"RetroKit/{game}-v0")
    try:
        assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        assert env.action_space == gym.spaces.Discrete(BUTTON_COUNTS[game])
        assert env.unwrapped.render_mode is None
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        assert all((obs[i] == obs[0]).all() for i in range(4))  # first frame repeated on reset
        for _ in range(20):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8 and isinstance(reward, float)
    finally:
        env.close()


def test_kwargs_shape_the_stack():
    env = make_retro_env(
        "Pong-Atari2600",
        frame_stack=2,
        screen_size=64,
        grayscale=False,
        crop_score=True,
        state="Start",
        render_mode="rgb_array",
    )
    try:
        assert env.observation_space.shape == (6, 64, 64)
        obs, _ = env.reset(seed=1)
        assert obs.shape == (6, 64, 64) and obs.dtype == np.uint8
        frame = env.render()
        assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8
    finally:
        env.close()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"frame_skipp": 4}, TypeError, "frame_skipp"),
        ({"sticky_actions": 1.5}, ValueError, "sticky_actions"),
        ({"max_episode_steps": 0}, ValueError, "max_episode_steps"),
        ({"state": "Level9"}, ValueError, "Start"),
        ({"action_set": "kombat"}, ValueError, "fighting"),
        ({"action_set": "LEFT"}, ValueError, "action_set"),
        ({"action_set": [["LEFT"], ["JUMP"]]}, ValueError, "valid buttons: BUTTON"),
        ({"action_set": [[]] * 0}, TypeError, "non-empty"),
        ({"render_mode": "ansi"}, ValueError, "render_mode"),
        ({"players": 0}, ValueError, "players"),
    ],
)
def test_bad_kwargs_raise_before_an_emulator_starts(kwargs, error, message):
    with pytest.raises(error, match=message):
        make_retro_env("Pong-Atari2600", **kwargs)
    env = make_retro_env("Pong-Atari2600")  # nothing was left holding the emulator
    env.close()


def test_crop_score_true_needs_a_known_box():
    with pytest.raises(ValueError, match="explicit"):
        make_retro_env("Airstriker-Genesis", crop_score=True)


# --- action sets ----------------------------------------------------------------------------------------


def test_named_and_user_action_sets():
    env = make_retro_env("Airstriker-Genesis", action_set="sonic")
    try:
        assert env.action_space == gym.spaces.Discrete(7)
        inner = env.get_wrapper_attr("action")
        mask = inner(5)  # ["DOWN", "B"]
        buttons = env.unwrapped.buttons
        assert sorted(buttons[i] for i in np.flatnonzero(mask)) == ["B", "DOWN"]
        env.reset(seed=0)
        env.step(6)
    finally:
        env.close()
    env = make_retro_env("Airstriker-Genesis", action_set="fighting")
    try:
        assert env.action_space == gym.spaces.Discrete(len(ACTION_SETS["fighting"]))
        assert env.get_wrapper_attr("get_action_meanings")()[15] == "DOWN+A"
    finally:
        env.close()
    env = make_retro_env("Airstriker-Genesis", action_set=[["A", "B", "C"], ["START"]])
    try:  # user combos are pressed exactly as listed, not filtered away by stable-retro
        raw = env.unwrapped
        for index, combo in enumerate([["A", "B", "C"], ["START"]]):
            pressed = raw.action_to_array(env.get_wrapper_attr("action")(index))[0]
            assert sorted(raw.buttons[i] for i in np.flatnonzero(pressed)) == sorted(combo)
    finally:
        env.close()
    env = make_retro_env("Pong-Atari2600", action_set=[[], ["UP"], ["DOWN", "BUTTON"]])
    try:
        assert env.action_space == gym.spaces.Discrete(3)
        env.reset(seed=0)
        env.step(2)
    finally:
        env.close()


def test_two_players_get_a_joint_discrete_space():
    env = make_retro_env("Pong-Atari2600", players=2, action_set=[[], ["UP"], ["DOWN"]])
    try:
        assert env.action_space == gym.spaces.Discrete(9)
        env.reset(seed=0)
        mask = env.get_wrapper_attr("action")(1 + 3 * 2)  # player 1 UP, player 2 DOWN
        buttons = env.unwrapped.buttons
        n = len(buttons)
        assert [buttons[i] for i in np.flatnonzero(mask[:n])] == ["UP"]
        assert [buttons[i] for i in np.flatnonzero(mask[n:])] == ["DOWN"]
        env.step(7)
    finally:
        env.close()


# --- stochastic frame skip ------------------------------------------------------------------------------


def test_sticky_zero_is_plain_repetition():
    actions = _actions(18, seed=3, count=40)
    raw = _raw_retro("Pong-Atari2600")
    try:
        recorder = ActionRecorder(raw)
        env = StochasticFrameSkip(recorder, skip=4, sticky_prob=0.0)
        env.reset(seed=0)
        skipped = [env.step(a) for a in actions]
        assert recorder.applied == [a for a in actions for _ in range(4)]
        raw.reset(seed=0)
        for a, (obs, reward, *_) in zip(actions, skipped, strict=True):
            total = 0.0
            for _ in range(4):
                frame, r, *_ = raw.step(a)
                total += r
            assert np.array_equal(obs, frame) and reward == total
    finally:
        raw.close()


def test_sticky_first_substep_keeps_previous_action_when_drawn():
    p, seed = 0.5, 11
    actions = _actions(18, seed=4, count=60)
    raw = _raw_retro("Pong-Atari2600")
    try:
        recorder = ActionRecorder(raw)
        env = StochasticFrameSkip(recorder, skip=4, sticky_prob=p)
        env.reset(seed=seed)
        for a in actions:
            env.step(a)
        rng = np.random.default_rng(seed)
        expected, previous, stuck = [], None, 0
        for a in actions:
            if previous is not None and rng.random() < p:
                first, stuck = previous, stuck + 1
            else:
                first = a
            expected += [first, a, a, a]
            previous = a
        assert recorder.applied == expected
        assert recorder.applied[0] == actions[0]  # the first action after reset applies at once
        assert 10 < stuck < 50
        # after a reset the first action applies at once again, with no draw
        recorder.applied.clear()
        env.reset()
        env.step(actions[1])
        assert recorder.applied[0] == actions[1]
    finally:
        raw.close()


# --- scores, clipping, time limit, determinism ----------------------------------------------------------


def _play(actions, **kwargs):
    env = make_retro_env("Airstriker-Genesis", max_episode_steps=None, **kwargs)
    try:
        env.reset(seed=5)
        rewards, episode = [], None
        for a in actions:
            _, r, terminated, truncated, info = env.step(a)
            rewards.append(r)
            if terminated or truncated:
                episode = info["episode"]
                break
        return rewards, episode, terminated
    finally:
        env.close()


def test_true_score_is_the_unclipped_sum_and_rewards_are_clipped():
    actions = _actions(126, seed=6, count=5000)
    clipped, episode, terminated = _play(actions)
    assert terminated, "Airstriker should reach game over under random play"
    assert set(clipped) <= {-1.0, 0.0, 1.0}
    raw, raw_episode, _ = _play(actions, clip_reward=False)
    assert raw_episode["r"] == sum(raw) == episode["r"] > sum(clipped) > 0
    assert episode["l"] == raw_episode["l"] == len(clipped)


def test_default_time_limit_truncates_as_a_real_game_end():
    env = make_retro_env("Pong-Atari2600", max_episode_steps=30)
    try:
        env.reset(seed=0)
        for _ in range(30):
            _, _, terminated, truncated, info = env.step(0)
        assert truncated and not terminated and info["episode"]["l"] == 30
    finally:
        env.close()
    from retro_atari_kit.envs.retro import DEFAULTS

    assert DEFAULTS["max_episode_steps"] == 4500
    env = gym.make("RetroKit/Pong-Atari2600-v0")
    try:
        assert env.get_wrapper_attr("_max_episode_steps") == 4500
    finally:
        env.close()


def _trajectory(seed, actions):
    env = gym.make("RetroKit/Airstriker-Genesis-v0")
    try:
        obs, _ = env.reset(seed=seed)
        frames = [obs]
        for a in actions:
            obs, *_ = env.step(a)
            frames.append(obs)
        return np.stack(frames)
    finally:
        env.close()


def test_same_seed_and_actions_give_identical_observations():
    actions = _actions(126, seed=8, count=150)
    first = _trajectory(0, actions)
    assert np.array_equal(first, _trajectory(0, actions))
    assert first[-1].any()


# --- one emulator per process ---------------------------------------------------------------------------


def test_second_env_runs_in_a_worker_until_the_first_is_closed():
    first = gym.make("RetroKit/Pong-Atari2600-v0")
    try:
        second = gym.make("RetroKit/Airstriker-Genesis-v0")
        try:
            assert isinstance(second.unwrapped, RetroWorkerEnv)
            assert second.unwrapped.spec.id == "RetroKit/Airstriker-Genesis-v0"
        finally:
            second.close()
    finally:
        first.close()
    second = gym.make("RetroKit/Airstriker-Genesis-v0")
    assert not isinstance(second.unwrapped, RetroWorkerEnv)  # the first freed this process's emulator
    second.reset(seed=0)
    del second  # dropped without close(): freed by garbage collection, not held forever
    gc.collect()
    third = gym.make("RetroKit/Pong-Atari2600-v0")
    assert not isinstance(third.unwrapped, RetroWorkerEnv)
    third.close()


def test_make_vec_runs_one_emulator_per_subprocess():
    venv = gym.make_vec("RetroKit/Pong-Atari2600-v0", num_envs=2)
    try:
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        for _ in range(5):
            obs, rewards, *_ = venv.step(np.array([1, 2]))
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    finally:
        venv.close()
    env = gym.make("RetroKit/Pong-Atari2600-v0")  # the main process still has its emulator slot free
    env.close()


def test_sb3_ppo_trains_a_few_steps_on_the_uint8_stack():
    from stable_baselines3 import PPO

    env = gym.make("RetroKit/Pong-Atari2600-v0")
    try:
        model = PPO("CnnPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
        assert model.observation_space.dtype == np.uint8
        model.learn(total_timesteps=64)
        action, _ = model.predict(env.reset(seed=1)[0], deterministic=True)
        assert env.action_space.contains(int(action))
    finally:
        env.close()
