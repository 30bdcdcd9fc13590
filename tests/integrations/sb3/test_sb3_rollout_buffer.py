"""ChannelsLastRolloutBuffer: SB3's RolloutBuffer samples, as uncopied channels-last uint8 batches."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from retro_atari_kit.integrations.sb3 import ChannelsLastRolloutBuffer, KitCnnPolicy, cnn_policy_kwargs
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.vec_env import DummyVecEnv


def _fill(buffers, n_envs: int, n_steps: int, seed: int = 0) -> None:
    """The same real Pong transitions (random actions, fake values / log-probs) into every buffer."""
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0") for _ in range(n_envs)])
    venv.seed(seed)
    rng = np.random.default_rng(seed)
    obs = venv.reset()
    episode_starts = np.ones(n_envs, dtype=np.float32)
    for _ in range(n_steps):
        actions = rng.integers(0, venv.action_space.n, n_envs)
        new_obs, rewards, dones, _ = venv.step(actions)
        values = torch.as_tensor(rng.normal(size=(n_envs, 1)), dtype=torch.float32)
        log_probs = torch.as_tensor(rng.normal(size=n_envs), dtype=torch.float32)
        for buf in buffers:
            buf.add(obs, actions.reshape(-1, 1), rewards, episode_starts, values, log_probs)
        obs, episode_starts = new_obs, dones.astype(np.float32)
    last_values = torch.zeros(n_envs, 1)
    for buf in buffers:
        buf.compute_returns_and_advantage(last_values, dones)
    venv.close()


@pytest.mark.parametrize("n_envs", [1, 3])
def test_samples_equal_sb3s_rollout_buffer_as_channels_last_uint8(n_envs):
    space = gym.make("RetroKit/Pong-v0").observation_space
    action_space = gym.spaces.Discrete(6)
    n_steps = 20
    ours = ChannelsLastRolloutBuffer(n_steps, space, action_space, device="cpu", n_envs=n_envs)
    sb3 = RolloutBuffer(n_steps, space, action_space, device="cpu", n_envs=n_envs)
    _fill([ours, sb3], n_envs, n_steps)
    assert ours.observations.shape == sb3.observations.shape == (n_steps, n_envs, 4, 84, 84)
    np.testing.assert_array_equal(ours.observations, sb3.observations)
    assert np.unique(sb3.observations).size > 2  # real frames, not blank ones

    for batch_size in (8, None):  # minibatches and the whole rollout
        np.random.seed(123)  # get() permutes with numpy's global RNG, as SB3 does
        ours_batches = list(ours.get(batch_size))
        np.random.seed(123)
        sb3_batches = list(sb3.get(batch_size))
        assert len(ours_batches) == len(sb3_batches)
        for a, b in zip(ours_batches, sb3_batches, strict=True):
            assert a.observations.dtype == torch.uint8
            assert a.observations.shape == b.observations.shape == (len(b.observations), 4, 84, 84)
            assert a.observations.is_contiguous(memory_format=torch.channels_last)
            assert torch.equal(a.observations, b.observations)
            for name in ("actions", "old_values", "old_log_prob", "advantages", "returns"):
                assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_frames_are_stored_channels_last_and_read_as_channel_first():
    space = gym.spaces.Box(0, 255, (3, 5, 7), np.uint8)  # distinct C, H, W: a mixed-up axis cannot pass
    buf = ChannelsLastRolloutBuffer(2, space, gym.spaces.Discrete(2), device="cpu", n_envs=1)
    frames = np.arange(2 * 3 * 5 * 7, dtype=np.uint8).reshape(2, 1, 3, 5, 7)
    for t in range(2):
        buf.add(frames[t], np.zeros((1, 1)), np.zeros(1), np.zeros(1), torch.zeros(1, 1), torch.zeros(1))
    assert buf.observations.base is not None and buf.observations.transpose(0, 1, 3, 4, 2).flags.c_contiguous
    np.testing.assert_array_equal(buf.observations, frames)
    buf.compute_returns_and_advantage(torch.zeros(1, 1), np.zeros(1))
    (batch,) = buf.get()
    assert batch.observations.shape == (2, 3, 5, 7)
    assert torch.equal(batch.observations, torch.from_numpy(frames[:, 0]))


def test_non_image_spaces_are_refused_with_a_hint():
    with pytest.raises(TypeError, match="channel-first images.*RolloutBuffer"):
        ChannelsLastRolloutBuffer(4, gym.spaces.Box(-1, 1, (8,)), gym.spaces.Discrete(2))


@pytest.mark.parametrize("algo", [PPO, A2C])
def test_ppo_and_a2c_train_with_it(algo):
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0") for _ in range(2)])
    extra = dict(batch_size=16) if algo is PPO else {}
    model = algo(
        KitCnnPolicy,
        venv,
        n_steps=16,
        device="cpu",
        seed=0,
        policy_kwargs=cnn_policy_kwargs(),
        rollout_buffer_class=ChannelsLastRolloutBuffer,
        **extra,
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(64)
    assert isinstance(model.rollout_buffer, ChannelsLastRolloutBuffer)
    assert model.rollout_buffer.observations.dtype == np.uint8
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    venv.close()
