"""CompactReplayBuffer: same samples as SB3's ReplayBuffer on real emulator transitions, far less memory."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from retro_atari_kit.integrations.sb3 import CompactReplayBuffer
from stable_baselines3 import DQN
from stable_baselines3.common.buffers import NStepReplayBuffer, ReplayBuffer
from stable_baselines3.common.vec_env import DummyVecEnv


def _venv(n_envs: int, max_episode_steps: int = 24) -> DummyVecEnv:
    # Breakout loses lives quickly under random play (terminations: episodic life); the time limit adds
    # truncations
    return DummyVecEnv(
        [lambda: gym.make("RetroKit/Breakout-v0", max_episode_steps=max_episode_steps) for _ in range(n_envs)]
    )


def _fill(buffers, venv: DummyVecEnv, steps: int, seed: int = 0) -> dict[str, int]:
    """Add ``steps`` vector steps of random play to every buffer, exactly as SB3's off-policy loop does."""
    venv.seed(seed)
    venv.action_space.seed(seed)
    obs = venv.reset()
    counts = {"terminated": 0, "truncated": 0}
    for _ in range(steps):
        actions = np.array([venv.action_space.sample() for _ in range(venv.num_envs)])
        new_obs, rewards, dones, infos = venv.step(actions)
        next_obs = new_obs.copy()
        for i, done in enumerate(dones):
            if done:
                next_obs[i] = infos[i]["terminal_observation"]
                counts["truncated" if infos[i].get("TimeLimit.truncated") else "terminated"] += 1
        for buf in buffers:
            buf.add(obs, next_obs, actions.reshape(-1, 1), rewards, dones, infos)
        obs = new_obs
    return counts


def _assert_same(compact: CompactReplayBuffer, plain: ReplayBuffer, inds: np.ndarray, seed: int) -> None:
    np.random.seed(seed)
    a = compact._get_samples(inds)
    np.random.seed(seed)
    b = plain._get_samples(inds)
    assert a.observations.dtype == torch.uint8 and a.next_observations.dtype == torch.uint8
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "discounts"):
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        assert x.shape == y.shape and x.dtype == y.dtype, name
        assert torch.equal(x, y), name


@pytest.mark.parametrize("n_envs", [1, 4])
def test_samples_equal_sb3_replay_buffer(n_envs):
    venv = _venv(n_envs)
    size = 60 * n_envs  # 60 slots per env: the 150 steps below wrap around twice
    kw = dict(
        observation_space=venv.observation_space, action_space=venv.action_space, device="cpu", n_envs=n_envs
    )
    compact = CompactReplayBuffer(size, **kw)
    plain = ReplayBuffer(size, **kw)
    counts = _fill([compact, plain], venv, 150, seed=1)  # seed 1: both kinds of episode end
    venv.close()
    assert compact.full and counts["terminated"] > 0 and counts["truncated"] > 0, counts
    valid = compact.valid_indices()
    assert len(valid) == compact.buffer_size - compact.stack
    _assert_same(compact, plain, np.repeat(valid, 2 * n_envs), seed=1)  # most (slot, env) pairs
    ended = np.flatnonzero(compact.dones[valid].any(axis=1))
    assert ended.size  # episode ends are among the compared slots
    # timeouts make done 0 in the samples, terminations keep it 1 (dones * (1 - timeouts))
    np.random.seed(3)
    s = compact._get_samples(valid)
    np.random.seed(3)
    env_inds = np.random.randint(0, n_envs, size=len(valid))
    raw_done = compact.dones[valid, env_inds]
    timeout = compact.timeouts[valid, env_inds]
    assert raw_done.sum() > 0
    np.testing.assert_array_equal(s.dones.numpy().ravel(), raw_done * (1 - timeout))


@pytest.mark.parametrize("n_envs, n_steps", [(1, 2), (4, 3)])
def test_n_step_samples_equal_sb3_n_step_buffer(n_envs, n_steps):
    """n-step returns, discounts, next obs and dones as SB3's NStepReplayBuffer, across terminations,
    truncations, the wrap-around and the newest transition."""
    venv = _venv(n_envs)
    size = 60 * n_envs
    kw = dict(
        observation_space=venv.observation_space, action_space=venv.action_space, device="cpu", n_envs=n_envs
    )
    compact = CompactReplayBuffer(size, n_steps=n_steps, gamma=0.9, **kw)
    plain = NStepReplayBuffer(size, n_steps=n_steps, gamma=0.9, **kw)
    counts = _fill([compact, plain], venv, 150, seed=1)
    venv.close()
    assert compact.full and counts["terminated"] > 0 and counts["truncated"] > 0, counts
    valid = compact.valid_indices()
    _assert_same(compact, plain, np.repeat(valid, 2 * n_envs), seed=1)
    np.random.seed(4)
    s = compact._get_samples(valid)
    # some windows sum all n rewards, some stop early at an episode end
    assert set(np.round(np.log(s.discounts.numpy().ravel()) / np.log(0.9)).astype(int)) == set(
        range(1, n_steps + 1)
    )


def test_n_step_before_wrap_stops_at_newest_transition():
    venv = _venv(2)
    kw = dict(
        observation_space=venv.observation_space, action_space=venv.action_space, device="cpu", n_envs=2
    )
    compact = CompactReplayBuffer(400, n_steps=3, **kw)
    plain = NStepReplayBuffer(400, n_steps=3, **kw)
    _fill([compact, plain], venv, 57, seed=5)
    venv.close()
    _assert_same(compact, plain, np.arange(57), seed=0)


def test_dqn_n_steps_reaches_compact_buffer():
    """The preset's n_steps goes to the kit's buffer (SB3 would ignore it for a custom buffer class)."""
    from retro_atari_kit.integrations.sb3.presets import to_sb3_kwargs

    kw = to_sb3_kwargs(
        {"replay_buffer_class": "retro_atari_kit.integrations.sb3.buffers.CompactReplayBuffer", "n_steps": 2},
        network="nature",
    )
    assert "n_steps" not in kw and kw["replay_buffer_kwargs"] == {"n_steps": 2, "gamma": 0.99}
    venv = _venv(1, max_episode_steps=40)
    model = DQN(env=venv, buffer_size=400, learning_starts=50, batch_size=16, device="cpu", seed=0, **kw)
    model.learn(100)
    rb = model.replay_buffer
    assert isinstance(rb, CompactReplayBuffer) and rb.n_steps == 2 and model._n_updates > 0
    venv.close()


def test_sample_before_wrap_and_newest_transition():
    venv = _venv(2)
    kw = dict(
        observation_space=venv.observation_space, action_space=venv.action_space, device="cpu", n_envs=2
    )
    compact, plain = CompactReplayBuffer(400, **kw), ReplayBuffer(400, **kw)
    _fill([compact, plain], venv, 57, seed=5)
    venv.close()
    assert not compact.full
    np.testing.assert_array_equal(compact.valid_indices(), np.arange(57))
    _assert_same(compact, plain, np.arange(57), seed=0)  # includes the newest slot (next frame ahead)
    batch = compact.sample(32)
    assert batch.observations.shape == (32, 4, 84, 84) and batch.observations.dtype == torch.uint8


def test_env_reset_without_done_keeps_earlier_next_obs():
    """A new learn() / a resumed run resets the env mid-episode: stored transitions stay exact."""
    venv = _venv(1, max_episode_steps=1000)
    kw = dict(observation_space=venv.observation_space, action_space=venv.action_space, device="cpu")
    compact, plain = CompactReplayBuffer(500, **kw), ReplayBuffer(500, **kw)
    _fill([compact, plain], venv, 20, seed=1)
    _fill([compact, plain], venv, 20, seed=2)  # resets the env: no done before it
    venv.close()
    _assert_same(compact, plain, np.arange(40), seed=0)


def test_memory_one_million_pong_transitions():
    env = gym.make("RetroKit/Pong-v0")
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    compact = CompactReplayBuffer.estimate_nbytes(1_000_000, obs_space, act_space)
    assert compact <= 7.5e9
    sb3 = 1_000_000 * (2 * 4 * 84 * 84 + 8 + 3 * 4)  # obs + next_obs + action + reward/done/timeout
    assert sb3 / compact > 7.5
    small = CompactReplayBuffer(1000, obs_space, act_space, device="cpu")
    fixed = small.nbytes - small.terminal_frames.nbytes
    assert fixed == CompactReplayBuffer.estimate_nbytes(1000, obs_space, act_space)
    assert small.frames.dtype == np.uint8 and small.frames.shape == (1000, 1, 1, 84, 84)


def test_dqn_trains_with_compact_buffer_and_stores_uint8():
    venv = _venv(2, max_episode_steps=40)
    model = DQN(
        "CnnPolicy",
        venv,
        buffer_size=400,
        learning_starts=50,
        batch_size=16,
        train_freq=4,
        target_update_interval=100,
        replay_buffer_class=CompactReplayBuffer,
        device="cpu",
        seed=0,
    )
    model.learn(200)
    rb = model.replay_buffer
    assert isinstance(rb, CompactReplayBuffer) and rb.frames.dtype == np.uint8
    assert not hasattr(rb, "observations") and not hasattr(rb, "next_observations")
    assert model.num_timesteps >= 200 and model._n_updates > 0
    venv.close()


@pytest.mark.parametrize(
    "space, match",
    [
        (gym.spaces.Box(0, 1, (4, 84, 84), np.float32), "uint8"),
        (gym.spaces.Box(0, 255, (84, 84), np.uint8), "uint8"),
    ],
)
def test_bad_observation_space_is_refused(space, match):
    with pytest.raises(TypeError, match=match):
        CompactReplayBuffer(100, space, gym.spaces.Discrete(4), device="cpu")


def test_non_stacked_observations_are_refused():
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    buf = CompactReplayBuffer(100, space, gym.spaces.Discrete(4), device="cpu")
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 255, (1, 4, 84, 84), dtype=np.uint8)
    with pytest.raises(ValueError, match="ReplayBuffer"):
        buf.add(obs, obs, np.array([0]), np.array([0.0]), np.array([False]), [{}])
