"""FastPPO (``integrations/sb3/fast_ppo.py``), FastA2C and their device rollout buffer against SB3's PPO and
A2C on CPU torch: the same advantages and returns, the same collected rollout from the same envs and seeds,
and the same parameters after one update on the same batch from the same weights."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces
from retro_atari_kit.integrations.sb3 import KitCnnPolicy, cnn_policy_kwargs
from retro_atari_kit.integrations.sb3.algorithms import fast_learner_options, learner_class
from retro_atari_kit.integrations.sb3.device_buffer import DeviceRolloutBuffer
from retro_atari_kit.integrations.sb3.fast_a2c import FastA2C
from retro_atari_kit.integrations.sb3.fast_ppo import FastPPO, _Uploader, compile_choice
from retro_atari_kit.integrations.sb3.graphs import (
    StepGraph,
    graphs_choice,
    make_capturable,
    set_learning_rate,
    unchecked_distributions,
)
from retro_atari_kit.integrations.sb3.presets import LinearSchedule
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv

from retro_atari_kit.registration import make_env

N_ENVS, N_STEPS = 2, 16
HP = dict(n_steps=N_STEPS, batch_size=8, n_epochs=2, learning_rate=2.5e-4, ent_coef=0.01, seed=0)


def _venv() -> DummyVecEnv:
    return DummyVecEnv([lambda: make_env("RetroKit/Pong-v0") for _ in range(N_ENVS)])


@pytest.fixture(scope="module")
def models():
    """SB3's PPO and FastPPO with the same weights and optimizer state (SB3's buffer for SB3)."""
    sb3_env, fast_env = _venv(), _venv()
    kwargs = dict(policy_kwargs=cnn_policy_kwargs("nature"), device="cpu", **HP)
    sb3 = PPO(KitCnnPolicy, sb3_env, rollout_buffer_class=RolloutBuffer, **kwargs)
    fast = FastPPO(KitCnnPolicy, fast_env, **kwargs)
    yield sb3, fast
    sb3_env.close()
    fast_env.close()


def _same_start(sb3, fast) -> None:
    fast.policy.load_state_dict(sb3.policy.state_dict())
    # a copy: torch's load_state_dict keeps the very moment tensors it is given, which the two optimizers
    # would then both step once they have any
    fast.policy.optimizer.load_state_dict(copy.deepcopy(sb3.policy.optimizer.state_dict()))
    for model in (sb3, fast):
        model.set_logger(Logger(folder=None, output_formats=[]))


def _train_both(sb3, fast) -> None:
    """One update each, the minibatch order the same: one permutation per epoch from numpy's RNG, as SB3
    draws it."""
    for model in (sb3, fast):
        np.random.seed(3)
        model.train()


def _assert_same_weights(fast, sb3, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    for (name, mine), theirs in zip(fast.policy.named_parameters(), sb3.policy.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=rtol, atol=atol, msg=name)


def _fill(buffer: RolloutBuffer, rng: np.random.Generator) -> None:
    """The same random rollout into any buffer, through SB3's ``add``."""
    buffer.reset()
    shape = buffer.observation_space.shape
    for _ in range(buffer.buffer_size):
        buffer.add(
            rng.integers(0, 256, (N_ENVS, *shape), dtype=np.uint8),
            rng.integers(0, buffer.action_space.n, N_ENVS),
            rng.choice([-1.0, 0.0, 0.0, 1.0], N_ENVS).astype(np.float32),
            rng.random(N_ENVS) < 0.1,
            torch.as_tensor(rng.normal(size=(N_ENVS, 1)), dtype=torch.float32),
            torch.as_tensor(rng.normal(-1.8, 0.1, N_ENVS), dtype=torch.float32),
        )
    buffer.compute_returns_and_advantage(
        torch.as_tensor(rng.normal(size=(N_ENVS, 1))), rng.random(N_ENVS) < 0.3
    )


def test_device_buffer_computes_sb3s_advantages_and_minibatches(models):
    sb3, fast = models
    assert isinstance(fast.rollout_buffer, DeviceRolloutBuffer)
    assert type(sb3.rollout_buffer) is RolloutBuffer
    _fill(sb3.rollout_buffer, np.random.default_rng(1))
    _fill(fast.rollout_buffer, np.random.default_rng(1))
    mine, theirs = fast.rollout_buffer, sb3.rollout_buffer
    for name in ("advantages", "returns", "values", "log_probs", "rewards", "episode_starts"):
        np.testing.assert_allclose(getattr(mine, name).numpy(), getattr(theirs, name), rtol=1e-6, atol=1e-6)
    np.random.seed(7)
    batches_theirs = list(theirs.get(8))
    np.random.seed(7)
    batches_mine = list(mine.get(8))
    assert len(batches_mine) == len(batches_theirs) == N_ENVS * N_STEPS // 8
    for a, b in zip(batches_mine, batches_theirs, strict=True):
        assert a.observations.dtype == torch.uint8 and a.observations.shape == (8, 4, 84, 84)
        assert a.observations.is_contiguous(memory_format=torch.channels_last)
        for field in a._fields:
            np.testing.assert_allclose(
                getattr(a, field).numpy(), getattr(b, field).numpy(), rtol=1e-6, atol=1e-6
            )


def test_fast_update_equals_sb3_train_on_the_same_batch(models):
    sb3, fast = models
    _same_start(sb3, fast)
    _fill(sb3.rollout_buffer, np.random.default_rng(2))
    _fill(fast.rollout_buffer, np.random.default_rng(2))
    before = [p.detach().clone() for p in fast.policy.parameters()]
    _train_both(sb3, fast)
    changed = 0
    for (name, mine), theirs, start in zip(
        fast.policy.named_parameters(), sb3.policy.parameters(), before, strict=True
    ):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6, msg=name)
        changed += int(not torch.equal(mine, start))
    assert changed == len(before)  # every parameter moved: the update did happen
    logged_mine, logged_theirs = fast.logger.name_to_value, sb3.logger.name_to_value
    assert set(logged_mine) == set(logged_theirs)
    for key, value in logged_theirs.items():
        assert logged_mine[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert fast._n_updates == sb3._n_updates == HP["n_epochs"]


def test_an_ent_coef_schedule_gives_sb3s_update_at_its_value(models):
    """FastPPO follows an ``ent_coef`` schedule (SB3's PPO takes a number): at a quarter of training left,
    0.04 held for half of training then linear to 0 is 0.02, and the update equals SB3's with 0.02."""
    sb3, fast = models
    _same_start(sb3, fast)
    _fill(sb3.rollout_buffer, np.random.default_rng(6))
    _fill(fast.rollout_buffer, np.random.default_rng(6))
    sb3.ent_coef, fast.ent_coef = 0.02, LinearSchedule(0.04, 0.0, start_fraction=0.5)
    sb3._current_progress_remaining = fast._current_progress_remaining = 0.25
    try:
        _train_both(sb3, fast)
    finally:
        sb3.ent_coef = fast.ent_coef = HP["ent_coef"]
    _assert_same_weights(fast, sb3)
    assert fast.logger.name_to_value["train/ent_coef"] == pytest.approx(0.02)
    assert "train/ent_coef" not in sb3.logger.name_to_value  # a number is not logged, as SB3 does not


@pytest.mark.parametrize("staged", [False, True], ids=["zero-copy", "staged"])
def test_fast_rollout_collects_what_sb3_collects(models, staged):
    """Same weights, same env seeds, same torch seed: the same actions, values, rewards and advantages;
    ``staged``: every upload through the reused host buffers that CUDA's path pins, copied by numpy."""
    sb3, fast = models
    _same_start(sb3, fast)
    fast._uploader = _Uploader(fast.device, stage=staged)
    collected = []
    for model in (sb3, fast):
        model.env.seed(5)
        model._last_obs = model.env.reset()
        model._last_episode_starts = np.ones(N_ENVS, dtype=bool)
        model.num_timesteps = 0
        _, callback = model._setup_learn(N_STEPS * N_ENVS, reset_num_timesteps=False)
        model._last_obs = model.env.reset()  # _setup_learn left the envs as they were: reset to the seed
        torch.manual_seed(11)
        assert model.collect_rollouts(model.env, callback, model.rollout_buffer, N_STEPS)
        collected.append(model.rollout_buffer)
    theirs, mine = collected
    assert model.num_timesteps == N_STEPS * N_ENVS
    np.testing.assert_array_equal(mine.observations.numpy(), theirs.observations)
    np.testing.assert_array_equal(mine.actions.numpy(), theirs.actions)
    for name in ("rewards", "episode_starts", "values", "log_probs", "advantages", "returns"):
        np.testing.assert_allclose(getattr(mine, name).numpy(), getattr(theirs, name), rtol=1e-5, atol=1e-6)
    if staged:  # one host buffer per kind, reused every step
        assert sorted(fast._uploader.staging) == ["obs", "rewards", "starts"]


@pytest.mark.parametrize("schedule", [False, True], ids=["number", "ent_coef-schedule"])
def test_fast_a2c_update_equals_sb3_train_on_the_same_batch(schedule):
    """``ent_coef-schedule``: FastA2C given 0.05 linear to 0 at 60% of training left, SB3's A2C 0.03."""
    sb3_env, fast_env = _venv(), _venv()
    kwargs = dict(policy_kwargs=cnn_policy_kwargs("nature"), device="cpu", n_steps=N_STEPS, seed=0)
    ent_coef = (LinearSchedule(0.05, 0.0), 0.03) if schedule else (0.01, 0.01)
    try:
        sb3 = A2C(KitCnnPolicy, sb3_env, rollout_buffer_class=RolloutBuffer, ent_coef=ent_coef[1], **kwargs)
        fast = FastA2C(KitCnnPolicy, fast_env, ent_coef=ent_coef[0], **kwargs)
        assert isinstance(fast.rollout_buffer, DeviceRolloutBuffer)
        _same_start(sb3, fast)
        for model in (sb3, fast):
            model._current_progress_remaining = 0.6
            _fill(model.rollout_buffer, np.random.default_rng(4))
        _train_both(sb3, fast)
    finally:
        sb3_env.close()
        fast_env.close()
    _assert_same_weights(fast, sb3)
    if schedule:
        assert fast.logger.name_to_value.pop("train/ent_coef") == pytest.approx(0.03)
    assert fast.logger.name_to_value.keys() == sb3.logger.name_to_value.keys()
    for key, value in sb3.logger.name_to_value.items():
        assert fast.logger.name_to_value[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


def test_fast_ppo_saves_and_loads_as_ppo(models, tmp_path):
    _, fast = models
    path = tmp_path / "fast.zip"
    fast.save(path)
    again = FastPPO.load(path, device="cpu")
    assert isinstance(again.rollout_buffer, DeviceRolloutBuffer)
    for a, b in zip(again.policy.parameters(), fast.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    plain = PPO.load(path, device="cpu")  # eval / export load it with SB3's class
    obs = np.zeros((1, 4, 84, 84), dtype=np.uint8)
    assert plain.predict(obs, deterministic=True)[0] == again.predict(obs, deterministic=True)[0]


def test_the_fast_learner_option():
    assert fast_learner_options("ppo", None) is None and fast_learner_options("ppo", False) is None
    assert fast_learner_options("ppo", True) == {}
    assert learner_class("ppo", {"compile": "auto"}) == (FastPPO, {"compile": "auto"})
    assert learner_class("ppo", None) == (PPO, {})
    assert learner_class("a2c", True) == (FastA2C, {})
    with pytest.raises(ValueError, match=r"dqn has none \(only ppo and a2c do\)"):
        fast_learner_options("dqn", True)
    with pytest.raises(ValueError, match="compile: true|false|auto"):
        fast_learner_options("ppo", {"compile": "yes"})
    assert compile_choice("auto", torch.device("cpu")) is False
    assert compile_choice("auto", torch.device("cuda")) is True
    with pytest.raises(ValueError, match="true, false or 'auto'"):
        compile_choice("maybe", torch.device("cpu"))


def test_the_device_buffer_refuses_dict_observations():
    space = spaces.Dict({"a": spaces.Box(0, 1, (2,))})
    with pytest.raises(TypeError, match="DictRolloutBuffer"):
        DeviceRolloutBuffer(4, space, spaces.Discrete(2))


def _fresh_pair(**fast_kwargs):
    """SB3's PPO and a FastPPO with ``fast_kwargs``, the same weights and optimizer state, the same batch."""
    sb3_env, fast_env = _venv(), _venv()
    kwargs = dict(policy_kwargs=cnn_policy_kwargs("nature"), device="cpu", **HP)
    sb3 = PPO(KitCnnPolicy, sb3_env, rollout_buffer_class=RolloutBuffer, **kwargs)
    fast = FastPPO(KitCnnPolicy, fast_env, **kwargs, **fast_kwargs)
    _same_start(sb3, fast)
    for model in (sb3, fast):
        _fill(model.rollout_buffer, np.random.default_rng(2))
    return sb3, fast, (sb3_env, fast_env)


@pytest.mark.slow  # inductor compiles the CNN's forward and backward on the CPU: ~1-2 minutes
@pytest.mark.timeout(600)
def test_compiled_update_equals_sb3_train_on_the_same_batch():
    """``compile=True`` on CPU torch: the acting step and the update through ``torch.compile`` (inductor),
    the parameters after one update as SB3's (to float32 rounding: compiled kernels sum in other orders)."""
    sb3, fast, envs = _fresh_pair(compile=True)
    try:
        _train_both(sb3, fast)
        obs = fast.rollout_buffer.observations[0]
        actions, values, log_probs = fast._learner_steps()[0](obs)  # the compiled acting step
        expected_values, expected_log_probs, _ = fast.policy.evaluate_actions(obs, actions.long().flatten())
    finally:
        for env in envs:
            env.close()
    _assert_same_weights(fast, sb3, rtol=1e-4, atol=1e-5)
    assert fast.logger.name_to_value["train/approx_kl"] == pytest.approx(
        sb3.logger.name_to_value["train/approx_kl"], rel=1e-3, abs=1e-6
    )
    torch.testing.assert_close(values.flatten(), expected_values.flatten(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(log_probs, expected_log_probs, rtol=1e-4, atol=1e-5)


def test_cuda_graphs_asked_for_on_a_cpu_run_the_same_steps_eagerly():
    """Graphs are CUDA's: ``cuda_graphs=True`` on the CPU runs the same functions uncaptured, SB3's update."""
    sb3, fast, envs = _fresh_pair(cuda_graphs=True, compile=False)
    try:
        _train_both(sb3, fast)
    finally:
        for env in envs:
            env.close()
    acting, update = fast._learner_steps()
    assert not acting.enabled and not update.enabled and not update.captured
    _assert_same_weights(fast, sb3)
    assert graphs_choice("auto", torch.device("cuda")) and graphs_choice(True, torch.device("cuda"))
    assert not graphs_choice(False, torch.device("cuda")) and not graphs_choice("auto", torch.device("cpu"))
    with pytest.raises(ValueError, match="cuda_graphs must be true, false or 'auto'"):
        graphs_choice("yes", torch.device("cpu"))


def test_a_capturable_optimizer_follows_the_schedule_and_saves_as_a_plain_one(tmp_path):
    """What a capture needs of the optimizer (a tensor learning rate written in place, ``capturable``), and
    that a model trained so saves an ordinary Adam state: its zip loads and trains on the CPU."""
    sb3, fast, envs = _fresh_pair(compile=False)
    try:
        optimizer = fast.policy.optimizer
        np.random.seed(3)
        fast.train()  # an update first: Adam's step counters exist
        assert make_capturable(optimizer)
        lr = optimizer.param_groups[0]["lr"]
        assert isinstance(lr, torch.Tensor) and optimizer.param_groups[0]["capturable"]
        fast._current_progress_remaining = 0.5
        fast._update_learning_rate(optimizer)
        assert optimizer.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(2.5e-4)  # constant lr
        set_learning_rate(optimizer, 1e-4)
        assert float(lr) == pytest.approx(1e-4)
        fast.save(tmp_path / "fast.zip")
        again = FastPPO.load(tmp_path / "fast.zip", env=fast.env, device="cpu")
        group = again.policy.optimizer.param_groups[0]
        assert isinstance(group["lr"], float) and not group["capturable"]
        _fill(again.rollout_buffer, np.random.default_rng(2))
        again.set_logger(Logger(folder=None, output_formats=[]))
        again.train()  # an uncaptured Adam on the CPU steps
        assert not make_capturable(torch.optim.SGD(fast.policy.parameters(), lr=0.1))  # none: unchanged
    finally:
        for env in envs:
            env.close()


def test_step_graph_off_cuda_calls_through_and_distribution_checks_come_back():
    from torch.distributions import Distribution

    calls = []
    step = StepGraph(lambda x: calls.append(x) or x * 2, enabled=False)
    assert torch.equal(step(torch.ones(2)), torch.full((2,), 2.0)) and len(calls) == 1
    assert not step.captured
    before = Distribution._validate_args
    with unchecked_distributions():
        assert Distribution._validate_args is False
    assert Distribution._validate_args is before
