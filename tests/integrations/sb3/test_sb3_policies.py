"""KitCnnPolicy: uint8 frames go to the kit's extractor as is (one division, by the model), same outputs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from retro_atari_kit.integrations.sb3 import KitCnnPolicy, NatureCNN, cnn_policy_kwargs
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.torch_layers import NatureCNN as SB3NatureCNN
from stable_baselines3.common.vec_env import DummyVecEnv


@pytest.fixture(scope="module")
def pong():
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0")])
    yield venv
    venv.close()


def _record_extractor_inputs(policy) -> list[tuple[torch.dtype, float]]:
    seen: list[tuple[torch.dtype, float]] = []
    policy.features_extractor.register_forward_pre_hook(
        lambda mod, inp: seen.append((inp[0].dtype, inp[0].float().max().item()))
    )
    return seen


@pytest.mark.parametrize("normalize_images", [True, False])
def test_uint8_frames_reach_the_kit_extractor_and_outputs_match_cnn_policy(pong, normalize_images):
    kwargs = dict(cnn_policy_kwargs("nature"), normalize_images=normalize_images)
    kit = PPO(KitCnnPolicy, pong, n_steps=16, batch_size=16, device="cpu", policy_kwargs=kwargs)
    sb3 = PPO("CnnPolicy", pong, n_steps=16, batch_size=16, device="cpu", policy_kwargs=kwargs)
    sb3.policy.load_state_dict(kit.policy.state_dict())
    seen = _record_extractor_inputs(kit.policy)
    frames = np.random.default_rng(0).integers(0, 256, (6, 4, 84, 84), dtype=np.uint8)
    frames[0] = 255
    obs, _ = kit.policy.obs_to_tensor(frames)
    actions = torch.arange(6) % pong.action_space.n
    kit_out = kit.policy.evaluate_actions(obs, actions)  # the training path
    sb3_out = sb3.policy.evaluate_actions(obs, actions)
    assert seen == [(torch.uint8, 255.0)]  # SB3's float cast and division were skipped
    for a, b in zip(kit_out, sb3_out, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)  # x / 255 vs x * (1 / 255): an ulp apart


def test_other_extractors_and_float_frames_take_sb3s_path(pong):
    model = PPO(
        KitCnnPolicy,
        pong,
        n_steps=16,
        batch_size=16,
        device="cpu",
        policy_kwargs=dict(features_extractor_class=SB3NatureCNN),
    )
    seen = _record_extractor_inputs(model.policy)
    model.policy.predict(np.full((1, 4, 84, 84), 255, dtype=np.uint8))
    assert seen == [(torch.float32, 1.0)]  # SB3 divided, as its own NatureCNN expects


def test_a2c_and_ppo_train_with_it_and_save_load(pong, tmp_path):
    for algo in (A2C, PPO):
        extra = dict(batch_size=8) if algo is PPO else {}
        model = algo(
            KitCnnPolicy, pong, n_steps=8, device="cpu", seed=0, policy_kwargs=cnn_policy_kwargs(), **extra
        )
        model.learn(32)
        assert model.rollout_buffer.observations.dtype == np.uint8
        model.save(tmp_path / "m.zip")
        loaded = algo.load(tmp_path / "m.zip", device="cpu")
        assert type(loaded.policy) is KitCnnPolicy
        assert isinstance(loaded.policy.features_extractor, NatureCNN)
        frames = np.zeros((1, 4, 84, 84), dtype=np.uint8)
        assert loaded.predict(frames, deterministic=True)[0] == model.predict(frames, deterministic=True)[0]


def test_kit_dqn_policy_gives_cnn_policy_q_values_from_uint8_frames(pong):
    from retro_atari_kit.integrations.sb3 import KitDQNPolicy
    from stable_baselines3 import DQN

    kw = dict(buffer_size=100, device="cpu", policy_kwargs=cnn_policy_kwargs("nature"))
    kit, sb3 = DQN(KitDQNPolicy, pong, **kw), DQN("CnnPolicy", pong, **kw)
    sb3.policy.load_state_dict(kit.policy.state_dict())
    frames = np.random.default_rng(1).integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    obs, _ = kit.policy.obs_to_tensor(frames)
    for net in ("q_net", "q_net_target"):
        seen: list[torch.dtype] = []
        getattr(kit.policy, net).features_extractor.register_forward_pre_hook(
            lambda mod, inp, seen=seen: seen.append(inp[0].dtype)
        )
        with torch.no_grad():
            torch.testing.assert_close(getattr(kit.policy, net)(obs), getattr(sb3.policy, net)(obs))
        assert seen == [torch.uint8]  # the frames reached the kit's extractor undivided
