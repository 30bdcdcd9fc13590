"""SB3 extractors: normalise exactly once, uint8 all the way to the device, real PPO / A2C / DQN training."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from retro_atari_kit.integrations.sb3 import ImpalaCNN, KitCnnPolicy, NatureCNN, make_vec_env, native_bf16
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.vec_env import DummyVecEnv

ENV = "RetroKit/Pong-v0"
SMALL_IMPALA = dict(depths=(8, 16), blocks_per_stage=1, features_dim=64)


@pytest.fixture(scope="module")
def pong():
    venv = DummyVecEnv([lambda: gym.make(ENV)])
    yield venv
    venv.close()


def _first_conv(model) -> torch.nn.Conv2d:
    return next(m for m in model.policy.modules() if isinstance(m, torch.nn.Conv2d))


@pytest.mark.parametrize("policy", ["CnnPolicy", KitCnnPolicy])
@pytest.mark.parametrize("extractor", [NatureCNN, ImpalaCNN])
@pytest.mark.parametrize("normalize_images", [True, False])
def test_first_conv_sees_unit_range_exactly_once(pong, policy, extractor, normalize_images):
    model = PPO(
        policy,
        pong,
        n_steps=16,
        batch_size=16,
        device="cpu",
        policy_kwargs=dict(features_extractor_class=extractor, normalize_images=normalize_images),
    )
    seen: list[tuple[float, torch.dtype]] = []
    hook = _first_conv(model).register_forward_pre_hook(
        lambda mod, inp: seen.append((inp[0].max().item(), inp[0].dtype))
    )
    white = np.full((1, 4, 84, 84), 255, dtype=np.uint8)
    model.policy.predict(white)
    obs_t, _ = model.policy.obs_to_tensor(white)
    model.policy.evaluate_actions(obs_t, torch.zeros(1, dtype=torch.long))  # the training path
    hook.remove()
    assert seen == [(1.0, torch.float32)] * 2
    assert model.policy.features_extractor.divides_by_255 is (not normalize_images)


def test_float_observation_space_is_never_divided():
    space = gym.spaces.Box(0.0, 1.0, (4, 84, 84), np.float32)
    ext = NatureCNN(space, normalized_image=True)
    assert ext.divides_by_255 is False
    seen = []
    ext.net.cnn[0].register_forward_pre_hook(lambda mod, inp: seen.append(inp[0].max().item()))
    ext(torch.ones(1, 4, 84, 84))
    assert seen == [1.0]


def test_observations_reach_the_device_as_uint8_and_rollouts_store_uint8(pong):
    model = PPO(
        "CnnPolicy",
        pong,
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        device="cpu",
        policy_kwargs=dict(features_extractor_class=NatureCNN),
    )
    dtypes = []
    original = model.policy.extract_features

    def spy(obs, *args, **kwargs):
        dtypes.append(obs.dtype)  # before SB3's preprocess_obs: what crossed to the device
        return original(obs, *args, **kwargs)

    model.policy.extract_features = spy
    model.learn(16)
    assert dtypes and set(dtypes) == {torch.uint8}
    assert model.rollout_buffer.observations.dtype == np.uint8


@pytest.mark.parametrize(
    "algo, kwargs",
    [
        (PPO, dict(n_steps=32, batch_size=64, n_epochs=1)),
        (A2C, dict(n_steps=8)),
        (
            DQN,
            dict(
                buffer_size=500, learning_starts=64, batch_size=16, train_freq=4, target_update_interval=100
            ),
        ),
    ],
)
@pytest.mark.parametrize("extractor, ext_kwargs", [(NatureCNN, {}), (ImpalaCNN, SMALL_IMPALA)])
def test_extractors_train_on_pong(algo, kwargs, extractor, ext_kwargs):
    venv = make_vec_env(ENV, n_envs=2, seed=0)
    try:
        model = algo(
            "CnnPolicy",
            venv,
            device="cpu",
            seed=0,
            **kwargs,
            policy_kwargs=dict(features_extractor_class=extractor, features_extractor_kwargs=ext_kwargs),
        )
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(256)
        assert model.num_timesteps >= 256
        changed = any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
        assert changed  # gradient steps happened
        assert isinstance(
            model.policy.features_extractor if algo is not DQN else model.q_net.features_extractor, extractor
        )
    finally:
        venv.close()


def test_qrdqn_from_sb3_contrib():
    from sb3_contrib import QRDQN

    venv = make_vec_env(ENV, n_envs=1, seed=0)
    try:
        model = QRDQN(
            "CnnPolicy",
            venv,
            buffer_size=300,
            learning_starts=64,
            batch_size=16,
            device="cpu",
            policy_kwargs=dict(
                features_extractor_class=ImpalaCNN, features_extractor_kwargs=SMALL_IMPALA, n_quantiles=8
            ),
        )
        model.learn(128)
        assert model.num_timesteps >= 128 and model._n_updates > 0
    finally:
        venv.close()


def test_ppo_on_a_retro_game():
    venv = make_vec_env("RetroKit/Airstriker-Genesis-v0", n_envs=1, seed=0)
    try:
        model = PPO(
            "CnnPolicy",
            venv,
            n_steps=64,
            batch_size=32,
            n_epochs=1,
            device="cpu",
            seed=0,
            policy_kwargs=dict(features_extractor_class=ImpalaCNN, features_extractor_kwargs=SMALL_IMPALA),
        )
        model.learn(192)
        assert model.num_timesteps >= 192
        assert model.rollout_buffer.observations.dtype == np.uint8
    finally:
        venv.close()


def test_model_saves_and_loads(tmp_path, pong):
    model = PPO(
        "CnnPolicy",
        pong,
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        device="cpu",
        policy_kwargs=dict(features_extractor_class=ImpalaCNN, features_extractor_kwargs=SMALL_IMPALA),
    )
    model.learn(16)
    model.save(tmp_path / "m.zip")
    loaded = PPO.load(tmp_path / "m.zip", device="cpu")
    obs = np.random.default_rng(0).integers(0, 256, (2, 4, 84, 84), dtype=np.uint8)
    a, _ = model.predict(obs, deterministic=True)
    b, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "space, error, match",
    [
        (gym.spaces.Box(0, 255, (4, 84, 64), np.uint8), ValueError, "square"),
        (gym.spaces.Box(0, 255, (84, 84), np.uint8), TypeError, "channel-first"),
        (gym.spaces.Discrete(3), TypeError, "Box"),
    ],
)
def test_bad_spaces_raise_one_clear_error(space, error, match):
    with pytest.raises(error, match=match):
        ImpalaCNN(space)


def test_bad_autocast_value():
    with pytest.raises(ValueError, match="autocast"):
        NatureCNN(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), autocast="fp8")


def test_native_bf16_follows_the_hardware():
    has_bf16 = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    assert native_bf16("cpu") is has_bf16 and native_bf16(torch.device("cpu")) is has_bf16
    assert native_bf16("meta") is False
    if not torch.cuda.is_available():  # without CUDA, a CUDA device string must not touch the driver
        assert native_bf16("cuda") is False and native_bf16("cuda:1") is False


@pytest.mark.parametrize("extractor, kwargs", [(NatureCNN, {}), (ImpalaCNN, SMALL_IMPALA)])
def test_bf16_autocast_runs_the_trunk_in_bf16_where_native_and_returns_float32(extractor, kwargs):
    """On a CPU with native bf16 (x86 with AVX512-BF16 or AMX) the convs run in bf16; elsewhere
    autocast="bf16" is a no-op, because emulated bf16 is slower than float32. Features, gradients and
    weights stay float32."""
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    torch.manual_seed(0)
    exact = extractor(space, **kwargs)
    mixed = extractor(space, autocast="bf16", **kwargs)
    mixed.load_state_dict(exact.state_dict())
    conv_dtypes = []
    for m in mixed.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.register_forward_hook(lambda mod, inp, out: conv_dtypes.append(out.dtype))
    frames = torch.randint(0, 256, (8, 4, 84, 84), dtype=torch.uint8)
    got, want = mixed(frames), exact(frames)
    expected = torch.bfloat16 if native_bf16("cpu") else torch.float32
    assert conv_dtypes and set(conv_dtypes) == {expected}
    assert got.dtype == torch.float32
    # bf16 keeps 8 significant bits: features agree to ~1% of their scale
    assert (got - want).abs().max().item() <= 0.02 * want.abs().max().item() + 1e-6
    got.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in mixed.parameters())


def _n_params(model) -> int:
    return sum(p.numel() for p in model.policy.parameters())


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])
def test_kit_policies_have_linear_heads_like_sb3_cnn_policy(pong, algo):
    """SB3 adds 64-unit tanh layers per head unless the extractor is its own NatureCNN class; those saturate
    and PPO stops learning. Presets and cnn_policy_kwargs must give the same network as SB3's CnnPolicy."""
    from retro_atari_kit.integrations.sb3 import cnn_policy_kwargs
    from retro_atari_kit.integrations.sb3.presets import get_preset, to_sb3_kwargs

    cls = {"ppo": PPO, "a2c": A2C, "dqn": DQN}[algo]
    small = dict(buffer_size=100) if algo == "dqn" else {}
    sb3_own = cls("CnnPolicy", pong, device="cpu", **small)
    kw = {
        k: v
        for k, v in to_sb3_kwargs(get_preset(algo), network="nature").items()
        if k in ("policy", "policy_kwargs")
    }
    from_preset = cls(env=pong, device="cpu", **kw, **small)
    direct = cls("CnnPolicy", pong, device="cpu", policy_kwargs=cnn_policy_kwargs("nature"), **small)
    assert any(type(m) is NatureCNN for m in from_preset.policy.modules())
    assert _n_params(from_preset) == _n_params(direct) == _n_params(sb3_own)
    if algo != "dqn":
        assert len(from_preset.policy.mlp_extractor.policy_net) == 0
        assert len(from_preset.policy.mlp_extractor.value_net) == 0


def test_cnn_policy_kwargs_rejects_unknown_network():
    from retro_atari_kit.integrations.sb3 import cnn_policy_kwargs

    with pytest.raises(ValueError, match="unknown network 'resnet'; choose one of nature, impala"):
        cnn_policy_kwargs("resnet")
