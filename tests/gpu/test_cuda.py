"""CUDA-only tests: the kit's models, SB3 policies, presets and replay buffers on a real GPU.

Every test here is skipped ("needs CUDA") where torch sees no CUDA device; ``benchmarks/gpu_suite.py`` runs
this file on a GPU machine. ``RETROKIT_TEST_DEVICE=cpu`` runs the same tests on the CPU instead (what only
CUDA has, pinned host memory and the VRAM estimate, is then not asserted): that checks the tests themselves
where no GPU is at hand. Real ALE frames and real SB3 training steps throughout; no timing assertions.

GPU results are compared with the CPU's at float32 with TF32 off (cuDNN would otherwise run float32
convolutions in TF32 on Ampere and later, ~1e-3 relative error), so the tolerances stay tight.
"""

from __future__ import annotations

import copy
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from retro_atari_kit.integrations.sb3 import (
    ChannelsLastRolloutBuffer,
    CompactReplayBuffer,
    KitCnnPolicy,
    KitDQNPolicy,
    cnn_policy_kwargs,
    native_bf16,
)
from retro_atari_kit.integrations.sb3.extractors import ImpalaCNN as ImpalaExtractor
from retro_atari_kit.integrations.sb3.extractors import NatureCNN as NatureExtractor
from retro_atari_kit.integrations.sb3.parallel_play import make_play_env, parallel_play_class
from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, list_presets, to_sb3_kwargs
from retro_atari_kit.integrations.sb3.training import load_model, train
from stable_baselines3 import DQN
from stable_baselines3 import PPO as PPO_CLASS
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticCnnPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

from retro_atari_kit.cli import main as retrokit
from retro_atari_kit.models import ImpalaCNN, NatureCNN
from retro_atari_kit.runs import TrainSpec
from retro_atari_kit.runs.startup import prepare_new_run

DEVICE = torch.device(os.environ.get("RETROKIT_TEST_DEVICE", "cuda"))
CUDA = DEVICE.type == "cuda"
PONG = "RetroKit/Pong-v0"

pytestmark = pytest.mark.skipif(
    CUDA and not torch.cuda.is_available(), reason="needs CUDA (torch.cuda.is_available() is False)"
)


@pytest.fixture
def no_tf32():
    """float32 convolutions and matmuls in full float32 while the test runs (see the module docstring)."""
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


@pytest.fixture(scope="module")
def frames() -> torch.Tensor:
    """64 real Pong observations (uint8, (4, 84, 84)) from random play, on the CPU."""
    venv = gym.make_vec(PONG, num_envs=4)
    obs, _ = venv.reset(seed=0)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(16):
        obs, *_ = venv.step(rng.integers(0, venv.single_action_space.n, 4))
        batches.append(obs)
    venv.close()
    out = torch.from_numpy(np.concatenate(batches))
    assert out.dtype == torch.uint8 and out.shape == (64, 4, 84, 84) and out.unique().numel() > 2
    return out


def _box() -> gym.spaces.Box:
    return gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


# -- models ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("channels_last", [True, False], ids=["channels-last", "contiguous"])
@pytest.mark.parametrize("cls", [NatureCNN, ImpalaCNN], ids=["nature", "impala"])
def test_model_on_device_equals_cpu_and_trains(cls, channels_last, frames, no_tf32):
    torch.manual_seed(0)
    cpu = cls(channels_last=channels_last)
    gpu = copy.deepcopy(cpu).to(DEVICE)
    convs = [m for m in gpu.modules() if isinstance(m, torch.nn.Conv2d)]
    # .to(device) keeps the weights' memory format
    assert all(c.weight.is_contiguous(memory_format=torch.channels_last) == channels_last for c in convs)
    x = frames.to(DEVICE)
    out = gpu(x)  # uint8 in: divided by 255 once, on the device
    assert out.device.type == DEVICE.type and out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), cpu(frames), rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(gpu(x.float() * (1.0 / 255.0)), out)  # float in [0, 1]: used as is
    # a training step on the device: gradients there, finite, in the weights' layout; weights move
    head = torch.nn.Linear(gpu.features_dim, 6).to(DEVICE)
    opt = torch.optim.Adam([*gpu.parameters(), *head.parameters()], 1e-3)
    before = convs[0].weight.detach().clone()
    head(gpu(x)).pow(2).mean().backward()
    for c in convs:
        assert c.weight.grad.device.type == DEVICE.type and torch.isfinite(c.weight.grad).all()
        assert c.weight.grad.is_contiguous(memory_format=torch.channels_last) == channels_last
    opt.step()
    assert not torch.equal(convs[0].weight.detach(), before)


@pytest.mark.parametrize("extractor", [NatureExtractor, ImpalaExtractor], ids=["nature", "impala"])
def test_bf16_autocast_runs_the_cnn_in_bf16_and_returns_float32(extractor, frames):
    native = native_bf16(DEVICE)
    if CUDA and torch.cuda.get_device_capability(DEVICE) >= (8, 0):
        assert native  # Ampere and later compute in bf16 natively
    fp32 = extractor(_box()).to(DEVICE)
    bf16 = extractor(_box(), autocast="bf16").to(DEVICE)
    bf16.load_state_dict(fp32.state_dict())
    assert bf16.runs_in_bf16(DEVICE) is native
    seen: list[torch.dtype] = []
    first_conv = next(m for m in bf16.modules() if isinstance(m, torch.nn.Conv2d))
    first_conv.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    x = frames.to(DEVICE)
    features = bf16(x)
    assert seen == [torch.bfloat16 if native else torch.float32]
    assert features.dtype == torch.float32  # SB3's heads and losses stay float32
    reference = fp32(x)
    if native:  # bf16 really ran, and only bf16 rounding sets the result apart (~1% of the norm)
        error = ((features - reference).norm() / reference.norm()).item()
        assert 0 < error < 0.03, error
    else:
        torch.testing.assert_close(features, reference)
    features.pow(2).mean().backward()  # AMP without loss scaling: float32 gradients, finite
    for p in bf16.parameters():
        assert p.dtype == torch.float32 and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()


# -- SB3 policies ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("network", ["nature", "impala"])
def test_kit_cnn_policy_on_device_equals_cpu_and_sb3s_path(network, frames, no_tf32):
    space, actions = _box(), gym.spaces.Discrete(6)
    cpu = KitCnnPolicy(space, actions, lambda _: 2.5e-4, **cnn_policy_kwargs(network))
    gpu = copy.deepcopy(cpu).to(DEVICE)
    # SB3's own ActorCriticCnnPolicy with the same weights: casts and divides by 255 before the extractor
    sb3 = ActorCriticCnnPolicy(space, actions, lambda _: 2.5e-4, **cnn_policy_kwargs(network)).to(DEVICE)
    sb3.load_state_dict(gpu.state_dict())
    acts = torch.arange(len(frames)) % 6
    values, log_prob, entropy = gpu.evaluate_actions(frames.to(DEVICE), acts.to(DEVICE))
    assert values.device.type == DEVICE.type
    for mine, theirs in zip((values, log_prob, entropy), cpu.evaluate_actions(frames, acts), strict=True):
        torch.testing.assert_close(mine.cpu(), theirs, rtol=1e-3, atol=1e-4)
    for mine, theirs in zip(
        (values, log_prob, entropy), sb3.evaluate_actions(frames.to(DEVICE), acts.to(DEVICE)), strict=True
    ):
        torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-4)
    # numpy uint8 observations in, actions out (SB3's obs_as_tensor puts them on the device as uint8)
    predicted, _ = gpu.predict(frames.numpy(), deterministic=True)
    logits = gpu.get_distribution(frames.to(DEVICE)).distribution.logits
    np.testing.assert_array_equal(predicted, logits.argmax(1).cpu().numpy())


def test_kit_dqn_policy_on_device_equals_cpu(frames, no_tf32):
    space, actions = _box(), gym.spaces.Discrete(6)
    cpu = KitDQNPolicy(space, actions, lambda _: 1e-4, **cnn_policy_kwargs("nature"))
    gpu = copy.deepcopy(cpu).to(DEVICE)
    for net in ("q_net", "q_net_target"):
        q = getattr(gpu, net)(frames.to(DEVICE))
        assert q.device.type == DEVICE.type and q.shape == (64, 6)
        torch.testing.assert_close(q.cpu(), getattr(cpu, net)(frames), rtol=1e-3, atol=1e-4)
    predicted, _ = gpu.predict(frames.numpy(), deterministic=True)
    np.testing.assert_array_equal(predicted, gpu.q_net(frames.to(DEVICE)).argmax(1).cpu().numpy())


# -- replay and rollout buffers -------------------------------------------------------------------------
def _fill_replay(buffers, steps: int, n_envs: int = 2) -> None:
    """The same real Breakout transitions (life losses and a time limit: both kinds of episode end) into
    every buffer, as SB3's off-policy loop adds them."""
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Breakout-v0", max_episode_steps=24)] * n_envs)
    venv.seed(1)
    venv.action_space.seed(1)
    obs = venv.reset()
    for _ in range(steps):
        actions = np.array([venv.action_space.sample() for _ in range(n_envs)])
        new_obs, rewards, dones, infos = venv.step(actions)
        next_obs = new_obs.copy()
        for i in np.flatnonzero(dones):
            next_obs[i] = infos[i]["terminal_observation"]
        for buf in buffers:
            buf.add(obs, next_obs, actions.reshape(-1, 1), rewards, dones, infos)
        obs = new_obs
    venv.close()


@pytest.mark.parametrize("n_steps", [1, 3])
def test_compact_replay_pinned_non_blocking_samples_equal_the_cpu_path(n_steps):
    space, actions = _box(), gym.spaces.Discrete(4)
    kw = dict(n_envs=2, n_steps=n_steps, gamma=0.9)
    on_device = CompactReplayBuffer(240, space, actions, device=DEVICE, **kw)
    on_cpu = CompactReplayBuffer(240, space, actions, device="cpu", **kw)
    _fill_replay([on_device, on_cpu], 150)  # wraps around: 120 slots per env
    assert on_device.full and on_cpu.dones.any()
    if CUDA:
        assert CompactReplayBuffer._host((2, 3), torch.uint8, True).is_pinned()
    # many batches back to back, no synchronisation in between: a pinned block reused before its
    # asynchronous copy finished would corrupt an earlier batch
    np.random.seed(7)
    device_batches = [on_device.sample(256) for _ in range(40)]
    np.random.seed(7)
    cpu_batches = [on_cpu.sample(256) for _ in range(40)]
    if CUDA:
        torch.cuda.synchronize(DEVICE)
    for got, want in zip(device_batches, cpu_batches, strict=True):
        assert got.observations.dtype == torch.uint8  # frames cross to the device as uint8
        assert (got.discounts is None) == (want.discounts is None) == (n_steps == 1)
        for name in ("observations", "actions", "next_observations", "dones", "rewards", "discounts"):
            a, b = getattr(got, name), getattr(want, name)
            if b is None:
                continue
            assert a.device.type == DEVICE.type and a.dtype == b.dtype and a.shape == b.shape, name
            assert torch.equal(a.cpu(), b), name


def test_channels_last_rollout_buffer_on_device_equals_sb3s():
    space, actions, n_envs, n_steps = _box(), gym.spaces.Discrete(6), 2, 16
    ours = ChannelsLastRolloutBuffer(n_steps, space, actions, device=DEVICE, n_envs=n_envs)
    sb3 = RolloutBuffer(n_steps, space, actions, device=DEVICE, n_envs=n_envs)
    venv = DummyVecEnv([lambda: gym.make(PONG)] * n_envs)
    venv.seed(0)
    rng = np.random.default_rng(0)
    obs, starts = venv.reset(), np.ones(n_envs, dtype=np.float32)
    for _ in range(n_steps):
        acts = rng.integers(0, 6, n_envs)
        new_obs, rewards, dones, _ = venv.step(acts)
        values = torch.as_tensor(rng.normal(size=(n_envs, 1)), dtype=torch.float32)
        log_probs = torch.as_tensor(rng.normal(size=n_envs), dtype=torch.float32)
        for buf in (ours, sb3):
            buf.add(obs, acts.reshape(-1, 1), rewards, starts, values, log_probs)
        obs, starts = new_obs, dones.astype(np.float32)
    venv.close()
    for buf in (ours, sb3):
        buf.compute_returns_and_advantage(torch.zeros(n_envs, 1), dones)
    np.random.seed(3)
    mine = list(ours.get(8))
    np.random.seed(3)
    theirs = list(sb3.get(8))
    for a, b in zip(mine, theirs, strict=True):
        assert a.observations.device.type == DEVICE.type and a.observations.dtype == torch.uint8
        assert a.observations.is_contiguous(memory_format=torch.channels_last)
        for name in a._fields:
            assert torch.equal(getattr(a, name), getattr(b, name)), name


# -- presets and training on the device -----------------------------------------------------------------
def _short(algo: str, preset: str) -> tuple[dict, int]:
    """Overrides and timesteps for a few real updates at the preset's n_envs and batch layout."""
    hp = get_preset(algo, preset)
    n = hp["n_envs"]
    if algo == "ppo":  # one minibatch of the preset's size per epoch, two rollouts
        steps = max(1, hp["batch_size"] // n)
        return {"n_steps": steps}, 2 * steps * n
    if algo == "a2c":
        return {}, 2 * hp.get("n_steps", 5) * n
    # off-policy: a small replay, 64 random steps, then four rounds of updates
    return {"buffer_size": 4096, "learning_starts": 64}, 64 + 4 * n * hp.get("train_freq", 4)


PRESETS = [(a, p, "nature") for a in ("ppo", "a2c", "dqn", "qrdqn") for p in list_presets().get(a, [])]
PRESETS += [("ppo", "default", "impala"), ("ppo", "gpu", "impala"), ("dqn", "pong-dqn-fast", "impala")]


@pytest.mark.parametrize(("algo", "preset", "network"), PRESETS, ids=["-".join(p) for p in PRESETS])
def test_preset_trains_on_the_device(algo, preset, network, tmp_path):
    overrides, timesteps = _short(algo, preset)
    spec = TrainSpec(
        algo=algo,
        env_id=PONG,
        network=network,
        timesteps=timesteps,
        n_envs=get_preset(algo, preset)["n_envs"],  # `retrokit train` would take one env per core
        device=str(DEVICE),
        preset=preset,
        overrides=overrides,
        run_dir=str(tmp_path / "run"),
    )
    lines: list[str] = []
    config, run_dir = prepare_new_run(spec, out=lines.append)
    result = train(config, run_dir, out=lines.append)
    text = "\n".join(lines)
    autocast = get_preset(algo, preset).get("policy_kwargs", {}).get("features_extractor_kwargs", {})
    if autocast.get("autocast") == "bf16" and native_bf16(DEVICE):
        assert f"precision: CNN under bf16 autocast ({DEVICE.type} has native bf16)" in text
    else:
        assert f"precision: float32 on {DEVICE.type}" in text  # the model trained on the device
    assert not result["interrupted"] and result["steps"] >= timesteps
    if CUDA:
        assert "estimated VRAM" in text
    model = load_model(result["model"], device=str(DEVICE))
    assert model._n_updates > 0  # real gradient steps happened
    for p in model.policy.parameters():
        assert p.device.type == DEVICE.type and torch.isfinite(p).all()


def test_retrokit_train_on_the_device(tmp_path, capsys):
    run = str(tmp_path / "run")
    argv = ["train", "ppo", PONG, "--device", str(DEVICE), "--n-envs", "8", "--timesteps", "512"]
    assert retrokit([*argv, "--set", "n_steps=32", "--run-dir", run]) == 0
    out = capsys.readouterr().out
    assert f"precision: float32 on {DEVICE.type}" in out and "done: 512 steps" in out
    if CUDA:
        assert "estimated VRAM" in out


def _flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in module.state_dict().values()])


def test_weights_of_a_device_trainer_reach_the_cpu_player():
    """pong-dqn-fast: the trainer updates on the device, the play process acts on the CPU with its weights."""
    preset = apply_overrides(
        get_preset("dqn", "pong-dqn-fast"), {"buffer_size": 2000, "learning_starts": 64, "batch_size": 32}
    )
    kw = to_sb3_kwargs(preset, network="nature")  # parallel_play is not an SB3 argument: dropped
    play = make_play_env(PONG, n_envs=1, seed=0)
    try:
        model = parallel_play_class(DQN)(env=play, seed=0, device=DEVICE, **kw)
        initial = _flat(model.q_net).clone()
        model.learn(128)
        player = play.player_weights()
    finally:
        play.close()
    assert next(model.q_net.parameters()).device.type == DEVICE.type
    assert model._n_updates == (128 - 64) // 4
    trained = _flat(model.q_net)
    assert not torch.equal(trained, initial) and torch.equal(player, trained)


def test_fast_ppo_on_the_device_collects_and_updates_as_sb3(no_tf32):
    """FastPPO (the gpu preset's learner, uncompiled and uncaptured here) on the device, frames through
    pinned memory and non-blocking copies:
    the same rollout and, from it, the same parameters as SB3's PPO on the same device and seeds."""
    from retro_atari_kit.integrations.sb3.fast_ppo import FastPPO

    from retro_atari_kit.registration import make_env

    hp = dict(n_steps=16, batch_size=16, n_epochs=2, seed=0, device=DEVICE)
    models = []
    for cls, extra in (
        (FastPPO, {"compile": False, "cuda_graphs": False}),
        (PPO_CLASS, {"rollout_buffer_class": RolloutBuffer}),
    ):
        venv = DummyVecEnv([lambda: make_env(PONG) for _ in range(2)])
        model = cls(KitCnnPolicy, venv, policy_kwargs=cnn_policy_kwargs("nature"), **hp, **extra)
        if models:
            model.policy.load_state_dict(models[0].policy.state_dict())
        venv.seed(5)
        model._last_obs, model._last_episode_starts = venv.reset(), np.ones(2, dtype=bool)
        _, callback = model._setup_learn(32, reset_num_timesteps=False)
        model._last_obs = venv.reset()
        torch.manual_seed(11)
        assert model.collect_rollouts(venv, callback, model.rollout_buffer, 16)
        venv.close()
        models.append(model)
    fast, sb3 = models
    assert fast.rollout_buffer.observations.device.type == DEVICE.type
    for name in ("values", "log_probs", "advantages", "returns"):
        mine, theirs = getattr(fast.rollout_buffer, name), getattr(sb3.rollout_buffer, name)
        np.testing.assert_allclose(mine.cpu().numpy(), theirs, rtol=1e-4, atol=1e-5, err_msg=name)
    for model in models:
        np.random.seed(3)
        model.train()
    for mine, theirs in zip(fast.policy.parameters(), sb3.policy.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


def test_fast_ppo_cuda_graphs_replay_the_eager_update(no_tf32):
    """The gpu preset's CUDA graphs: the acting step and the update captured after their warm-up calls give
    what the same functions give uncaptured (same weights, same rollout, same minibatch order)."""
    from retro_atari_kit.integrations.sb3.fast_ppo import FastPPO

    from retro_atari_kit.registration import make_env

    hp = dict(n_steps=16, batch_size=8, n_epochs=2, seed=0, device=DEVICE, compile=False)
    models = []
    for graphs in (True, False):
        venv = DummyVecEnv([lambda: make_env(PONG) for _ in range(2)])
        model = FastPPO(
            KitCnnPolicy, venv, policy_kwargs=cnn_policy_kwargs("nature"), cuda_graphs=graphs, **hp
        )
        if models:
            model.policy.load_state_dict(models[0].policy.state_dict())
        _, callback = model._setup_learn(32, reset_num_timesteps=False)
        venv.seed(5)
        model._last_obs, model._last_episode_starts = venv.reset(), np.ones(2, dtype=bool)
        assert model.collect_rollouts(venv, callback, model.rollout_buffer, 16)  # 16 acting steps
        venv.close()
        models.append(model)
    graphed, eager = models
    acting, update = graphed._learner_steps()
    assert acting.captured == CUDA  # 16 calls: 3 warm-up, a capture, replays
    obs = graphed.rollout_buffer.observations[0]
    actions, values, log_probs = acting(obs)
    expected_values, expected_log_probs, _ = graphed.policy.evaluate_actions(obs, actions.long().flatten())
    torch.testing.assert_close(values.flatten(), expected_values.flatten(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(log_probs, expected_log_probs, rtol=1e-4, atol=1e-5)
    eager.rollout_buffer = graphed.rollout_buffer  # the same rollout for both updates
    for model in models:
        np.random.seed(3)
        model.train()  # 2 epochs x 4 minibatches: 3 warm-up, a capture, 4 replays
    assert update.captured == CUDA
    for mine, theirs in zip(graphed.policy.parameters(), eager.policy.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
    for key in ("train/value_loss", "train/approx_kl", "train/clip_fraction"):
        assert graphed.logger.name_to_value[key] == pytest.approx(
            eager.logger.name_to_value[key], rel=1e-3, abs=1e-6
        ), key
