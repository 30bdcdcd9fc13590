"""Each evaluation protocol's env, built by the kit on the real emulator, against its published definition:
Machado et al. 2018 (sticky actions 0.25, all 18 actions, no life-loss ends, no no-ops, ALE's 108k-frame
cap) and the Nature protocol (up to 30 no-ops, minimal actions, an 18,000-frame cap, epsilon 0.05 for
value-based agents). The training protocol is the run's own settings, unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from retro_atari_kit.errors import RunError
from retro_atari_kit.evaluation import protocol_env_kwargs
from retro_atari_kit.evaluation.protocols import (
    EpsilonGreedy,
    MappedActions,
    full_action_indices,
    protocol_model,
)
from retro_atari_kit.registration import make_env


def built(env_id: str, protocol: str, run_kwargs: dict | None = None) -> gym.Env:
    return make_env(env_id, **protocol_env_kwargs(protocol, env_id, run_kwargs or {}))


def wrappers_of(env: gym.Env) -> list[str]:
    names = []
    while isinstance(env, gym.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


def test_machado_env_is_sticky_full_action_set_and_capped_at_108k_frames():
    env = built("RetroKit/Pong-v0", "machado", {"max_episode_steps": 500, "frame_stack": 4})
    try:
        ale = env.unwrapped.ale
        assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
        assert env.action_space == gym.spaces.Discrete(18)
        assert env.unwrapped.get_action_meanings()[17] == "DOWNLEFTFIRE"  # the full set, in ALE's order
        assert ale.getInt("max_num_frames_per_episode") == 108_000
        # the run's own game limit is lifted (ALE's cap is the only one), no life-loss episodes
        names = wrappers_of(env)
        assert "TimeLimit" not in names and "EpisodicLife" not in names
        assert env.observation_space.shape == (4, 84, 84)  # what the agent sees stays the run's
        for seed in range(3):  # no no-op starts: only the FIRE reset's 2 steps x 4 frames, for every seed
            env.reset(seed=seed)
            assert ale.getEpisodeFrameNumber() == 8
    finally:
        env.close()


def test_machado_life_loss_does_not_end_the_episode():
    env = built("RetroKit/Breakout-v0", "machado")
    try:
        env.reset(seed=3)
        rng = np.random.default_rng(0)
        lives = env.unwrapped.ale.lives()
        for _ in range(3000):
            _, _, terminated, truncated, info = env.step(int(rng.integers(18)))
            now = env.unwrapped.ale.lives()
            if now < lives:
                assert not (terminated or truncated) and "episode" not in info  # the game goes on
                break
        else:
            pytest.fail("no life lost in 3000 random steps of Breakout")
        assert 0 < now == lives - 1
    finally:
        env.close()


def test_sticky_actions_change_what_the_same_actions_do():
    def frames(protocol: str) -> list[bytes]:
        env = built("RetroKit/Pong-v0", protocol)
        try:
            obs, _ = env.reset(seed=5)
            out = []
            for t in range(200):
                obs, *_ = env.step(3 if (t // 7) % 2 else 4)  # RIGHT / LEFT in the full set
                out.append(obs.tobytes())
            return out
        finally:
            env.close()

    machado = frames("machado")
    assert machado == frames("machado")  # seeded: reproducible
    env = make_env("RetroKit/Pong-v0", full_action_space=True, noop_max=0, terminal_on_life_loss=False)
    try:  # the same env without stickiness plays the same actions differently
        env.reset(seed=5)
        plain = [env.step(3 if (t // 7) % 2 else 4)[0].tobytes() for t in range(200)]
    finally:
        env.close()
    assert plain != machado


def test_nature_env_caps_games_at_18000_frames_with_the_true_score_reported():
    env = built("RetroKit/MontezumaRevenge-v0", "nature")
    try:
        ale = env.unwrapped.ale
        assert ale.getFloat("repeat_action_probability") == 0.0
        env.reset(seed=0)
        steps = 0
        while True:  # NOOP: the explorer stands on the start ledge; only the cap ends this game
            _, _, terminated, truncated, info = env.step(0)
            steps += 1
            if terminated or truncated:
                break
        assert truncated and not terminated
        assert info["episode"]["l"] == 4500 and info["episode"]["r"] == 0.0  # the FIRE reset steps count
        # 4500 agent steps of 4 frames, plus the 1..30 no-op frames of the reset
        assert 18_000 < ale.getEpisodeFrameNumber() <= 18_030
    finally:
        env.close()


def test_nature_keeps_the_minimal_action_set():
    env = built("RetroKit/Pong-v0", "nature")
    try:
        assert env.action_space == gym.spaces.Discrete(6)
    finally:
        env.close()


def test_training_protocol_is_the_runs_kwargs_and_retro_games_refuse_the_others():
    run = {"max_episode_steps": 500, "sticky_actions": 0.1}
    assert protocol_env_kwargs("training", "RetroKit/Pong-v0", run) == run
    assert protocol_env_kwargs("training", "RetroKit/Airstriker-Genesis-v0", run) == run
    with pytest.raises(RunError, match="machado protocol is defined for ALE games.*--protocol training"):
        protocol_env_kwargs("machado", "RetroKit/Airstriker-Genesis-v0", {})
    with pytest.raises(
        RunError, match="unknown protocol 'atari100k'; choose one of training, machado, nature"
    ):
        protocol_env_kwargs("atari100k", "RetroKit/Pong-v0", {})


class Constant:
    """A model that always picks one action (of ``n``)."""

    def __init__(self, action: int, n: int) -> None:
        self.action, self.action_space = action, gym.spaces.Discrete(n)
        self.observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        return np.full(len(obs), self.action, dtype=np.int64), state


def test_minimal_actions_are_sent_as_the_full_set_actions_of_the_same_meaning():
    # ALE's Pong: minimal NOOP FIRE RIGHT LEFT RIGHTFIRE LEFTFIRE; full set order NOOP FIRE UP RIGHT LEFT ...
    indices = full_action_indices("RetroKit/Pong-v0")
    assert indices == [0, 1, 3, 4, 11, 12]
    played, notes = protocol_model(Constant(2, 6), "machado", "RetroKit/Pong-v0", "ppo", n_env_actions=18)
    assert isinstance(played, MappedActions) and notes == {"action_map": indices}
    assert played.action_space.n == 18
    assert played.predict(np.zeros((3, 4, 84, 84), np.uint8))[0].tolist() == [3, 3, 3]  # RIGHT is 3 in full
    # a policy-gradient agent keeps its own action choice under Nature; its set already is the env's
    same, notes = protocol_model(Constant(2, 6), "nature", "RetroKit/Pong-v0", "ppo", n_env_actions=6)
    assert notes == {} and isinstance(same, Constant)


def test_value_based_agents_play_epsilon_greedy_005_under_nature():
    played, notes = protocol_model(
        Constant(1, 6), "nature", "RetroKit/Pong-v0", "dqn", seed=7, n_env_actions=6
    )
    assert isinstance(played, EpsilonGreedy) and notes == {"epsilon": 0.05}
    obs = np.zeros((20_000, 1), np.uint8)
    actions = played.predict(obs)[0]
    # the greedy action, except where a uniform draw over the 6 actions replaced it (5% x 5/6 of steps)
    assert abs(np.mean(actions != 1) - 0.05 * 5 / 6) < 0.006
    assert set(np.unique(actions)) == set(range(6))
    again, _ = protocol_model(Constant(1, 6), "nature", "RetroKit/Pong-v0", "dqn", seed=7, n_env_actions=6)
    assert np.array_equal(again.predict(obs)[0], actions)  # seeded: the same evaluation twice


class ObsDriven:
    """Deterministic actions that depend on what the agent sees: equal games need equal observations."""

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        return (obs[:, -1, 30:80, :].astype(np.int64).sum(axis=(1, 2)) // 7 % 4), state


def test_the_vector_backend_plays_the_same_games_as_the_loop():
    from retro_atari_kit.evaluation import evaluate_model
    from retro_atari_kit.evaluation.play import evaluate_model_vector

    # the subprocess backend runs gym.make envs: the same no-op draws as the loop's, so the same games
    kwargs = {"max_episode_steps": 400}
    lengths: list[tuple[int, float, int]] = []
    loop = evaluate_model(
        ObsDriven(), "RetroKit/Breakout-v0", kwargs, episodes=4, seed=7, max_envs=2,
        on_game=lambda k, score, steps: lengths.append((k, score, steps)),
    )  # fmt: skip
    seen: list[tuple[int, float, int]] = []
    vector = evaluate_model_vector(
        ObsDriven(), "RetroKit/Breakout-v0", kwargs, episodes=4, seed=7, num_envs=2, backend="subprocess",
        on_game=lambda k, score, steps: seen.append((k, score, steps)),
    )  # fmt: skip
    assert vector == loop and seen == lengths
    assert len({(s, n) for _, s, n in lengths}) > 1  # the actions mattered: the games differ


def test_training_under_a_protocol_sets_its_play_but_not_its_action_set():
    from retro_atari_kit.protocols import run_env_kwargs, training_env_kwargs

    own = {"crop_score": True, "frame_skip": 4}
    machado = training_env_kwargs("machado", "RetroKit/Pong-v0", own)
    assert machado == {
        **own,
        "sticky_actions": 0.25,
        "terminal_on_life_loss": False,
        "noop_max": 0,
        "max_episode_steps": None,
    }
    # the Nature cap counts agent steps of the run's frame skip; the training protocol changes nothing
    assert training_env_kwargs("nature", "RetroKit/Pong-v0", {"frame_skip": 2})["max_episode_steps"] == 9000
    assert training_env_kwargs("training", "RetroKit/Airstriker-Genesis-v0", own) == own
    # a kwarg equal to the protocol's is no contradiction
    assert training_env_kwargs("machado", "RetroKit/Pong-v0", {"noop_max": 0})["noop_max"] == 0
    # what an evaluation goes over: the run's own kwargs again, for every protocol
    assert run_env_kwargs(machado, "machado") == own
    assert run_env_kwargs(own, None) == run_env_kwargs(own, "training") == own
    assert protocol_env_kwargs("machado", "RetroKit/Pong-v0", run_env_kwargs(machado, "machado")) == {
        **machado,
        "full_action_space": True,
    }
    with pytest.raises(RunError, match="--protocol machado sets sticky_actions=0.25; drop --env-kwarg"):
        training_env_kwargs("machado", "RetroKit/Pong-v0", {"sticky_actions": 0.1})


def test_pong_full_set_actions_outside_the_minimal_set_repeat_minimal_ones():
    """Why a run trained under Machado keeps the minimal action set (docs/evaluation.md): from one state, each
    of the 18 actions leaves the emulator's RAM as exactly one of the 6 minimal actions does."""
    env = make_env("RetroKit/Pong-v0", full_action_space=True, frame_stack=1)
    try:
        env.reset(seed=0)
        ale = env.unwrapped.ale
        rng = np.random.default_rng(0)
        for _ in range(300):
            ale.act(ale.getMinimalActionSet()[rng.integers(6)])
        state = ale.cloneState()

        def ram_after(action) -> bytes:
            ale.restoreState(state)
            for _ in range(40):
                ale.act(action)
            return ale.getRAM().tobytes()

        minimal = {ram_after(a): a.name for a in ale.getMinimalActionSet()}
        assert len(minimal) == 6  # the minimal actions all differ
        same_as = {a.name: minimal.get(ram_after(a)) for a in ale.getLegalActionSet()}
        assert None not in same_as.values(), same_as
        assert same_as["UP"] == same_as["DOWN"] == "NOOP" and same_as["DOWNLEFTFIRE"] == "LEFTFIRE"
    finally:
        env.close()
