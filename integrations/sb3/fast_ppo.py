"""``FastPPO``: SB3's PPO with a learner that keeps the device busy and the host out of its way, the learner
of ``--preset gpu``.

::

    from retro_atari_kit.integrations.sb3 import KitCnnPolicy, cnn_policy_kwargs, make_vec_env
    from retro_atari_kit.integrations.sb3.fast_ppo import FastPPO
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=32, seed=0)
    model = FastPPO(KitCnnPolicy, venv, n_steps=32, batch_size=256, n_epochs=4,
                    policy_kwargs=cnn_policy_kwargs("impala"), device="auto")
    model.learn(1_000_000)

or ``retrokit train ppo RetroKit/Pong-v0 --preset gpu``. What differs from SB3's ``PPO``, all of it in
``collect_rollouts`` and ``train`` (docs/sb3.md, "FastPPO"):

- the rollout lives on the device (:class:`~retro_atari_kit.integrations.sb3.device_buffer.
  DeviceRolloutBuffer`): each step's uint8 frames go to the device once (through a pinned host buffer
  and a non-blocking copy on CUDA) and serve both the policy's forward and the buffer; values, log-probs,
  rewards, GAE and returns never leave it; minibatches are gathers on the device.
- one host synchronisation per env step, the actions the envs need: no distribution argument checks
  (each reads a value on the host), and the envs start stepping (``step_async``) as soon as the actions are
  on the host while the step's tensors are written into the buffer.
- the acting forward and each minibatch update (forward, loss, backward, gradient clipping, Adam) are
  one function of tensors each, which ``compile`` runs through ``torch.compile`` and ``cuda_graphs``
  replays as one CUDA graph (:mod:`~retro_atari_kit.integrations.sb3.graphs`): both ``"auto"`` by default,
  on CUDA only. Elsewhere the same functions run eagerly.
- the update's statistics (SB3's ``train/*`` records) stay on the device and are read once per update
  (with ``target_kl``, each minibatch's KL is read to decide whether to stop, as SB3 does, and the
  minibatch runs uncaptured).

The update is SB3's: on the same rollout, weights and numpy seed it gives the same parameters as
``PPO.train`` (a test checks it, eager; another checks the compiled path on CPU torch). The class is a
``PPO``: save / load zips (the optimizer saved as an uncaptured one, so a zip loads anywhere), callbacks,
the logger (progress.csv, tensorboard), ``learn`` and every ``retrokit`` feature work as with SB3's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from retro_atari_kit.integrations.sb3.device_buffer import DeviceRolloutBuffer
from retro_atari_kit.integrations.sb3.graphs import (
    StepGraph,
    graphs_choice,
    make_capturable,
    plain_optimizer_state,
    set_learning_rate,
    unchecked_distributions,
)
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

__all__ = ["DeviceRollouts", "FastPPO", "compile_choice"]


def compile_choice(compile: bool | str, device: torch.device) -> bool:  # noqa: A002 - torch's word
    """Whether to ``torch.compile`` the learner's steps: ``True`` / ``False`` as given, ``"auto"`` on CUDA
    only (on a CPU compiling costs more than it saves in a run of this size)."""
    if compile == "auto":
        return torch.device(device).type == "cuda"
    if isinstance(compile, bool):
        return compile
    raise ValueError(f"compile must be true, false or 'auto', got {compile!r}")


class _Uploader:
    """Host arrays to the device: through one staging buffer per kind (pinned on CUDA) and a non-blocking
    copy, or a zero-copy view where the device is the CPU.

    The staging copy is numpy's, in the calling thread. torch's ``copy_`` of a frame batch (~1 MB) runs on
    torch's OpenMP threads, which then spin for milliseconds waiting for more work (~5.5 ms of CPU after one
    copy on the 2-core VM, docs/performance.md): on a GPU box that CPU is taken from the env workers
    stepping beside it, every env step. SB3's path never makes that call; the kit's replay buffer gathers
    into pinned memory with numpy for the same reason.

    A staging buffer is written again only a step later, after the actions of the step in between were read
    back (``.cpu()``), which waits for every copy queued before it: no copy still reads it then.
    """

    def __init__(self, device: torch.device, stage: bool | None = None) -> None:
        self.device = device
        # stage: through a host buffer (CUDA's pinned one; other values for tests of this path on a CPU)
        self.stage = device.type == "cuda" if stage is None else stage
        self.staging: dict[str, tuple[torch.Tensor, np.ndarray]] = {}

    def __call__(self, kind: str, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        array = np.asarray(array)
        if not self.stage:
            out = torch.from_numpy(np.ascontiguousarray(array)).to(self.device)
        else:
            buffer = self.staging.get(kind)
            if buffer is None or buffer[1].shape != array.shape or buffer[1].dtype != array.dtype:
                tensor = torch.from_numpy(np.empty(array.shape, array.dtype))
                if self.device.type == "cuda":
                    tensor = tensor.pin_memory()
                buffer = self.staging[kind] = (tensor, tensor.numpy())
            np.copyto(buffer[1], array)
            out = buffer[0].to(self.device, non_blocking=True, copy=True)  # copy: always, CPU included
        return out if dtype is None else out.to(dtype)


class DeviceRollouts:
    """The half of the kit's fast on-policy learners (FastPPO, FastA2C) that is not the loss, placed before
    SB3's class in the bases: a device-resident buffer, pinned non-blocking uploads, one sync per env step,
    envs stepping while the step is stored, and the acting forward and the update step as functions of
    tensors, compiled and replayed as CUDA graphs where chosen (see the module docstring).

    Adds the constructor arguments ``compile`` and ``cuda_graphs`` (each ``False``, ``True`` or ``"auto"``:
    CUDA only; graphs are never used off CUDA). ``rollout_buffer_class`` is always
    :class:`DeviceRolloutBuffer` (another class given is replaced, so that presets written for SB3's
    classes work unchanged); with ``use_sde`` the rollout is collected by SB3's loop (into the same buffer).
    Dict observations are refused (the buffer's TypeError). A subclass provides ``_loss(*tensors) ->
    (loss, statistics)``.
    """

    def __init__(
        self,
        *args: Any,
        compile: bool | str = "auto",  # noqa: A002 - torch's word
        cuda_graphs: bool | str = "auto",
        **kwargs: Any,
    ) -> None:
        kwargs["rollout_buffer_class"] = DeviceRolloutBuffer
        kwargs.pop("rollout_buffer_kwargs", None)
        self.compile, self.cuda_graphs = compile, cuda_graphs
        super().__init__(*args, **kwargs)

    def _setup_model(self) -> None:
        # also on load, where SB3 sets the stored / overriding attributes before calling this
        self.rollout_buffer_class, self.rollout_buffer_kwargs = DeviceRolloutBuffer, {}
        super()._setup_model()
        self._uploader = _Uploader(self.device)
        self._steps: tuple[StepGraph, StepGraph] | None = None  # built when learning starts

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_uploader", "_steps"]

    def get_parameters(self) -> dict[str, dict]:
        params = super().get_parameters()
        if "policy.optimizer" in params:  # saved as an uncaptured optimizer: the zip loads on any device
            params["policy.optimizer"] = plain_optimizer_state(params["policy.optimizer"])
        return params

    def _setup_learn(self, *args: Any, **kwargs: Any) -> Any:
        result = super()._setup_learn(*args, **kwargs)
        self._learner_steps()  # after a load has put the saved optimizer state in place
        return result

    def _learner_steps(self) -> tuple[StepGraph, StepGraph]:
        """The acting and update steps: compiled and captured as chosen, made once per model."""
        if self._steps is None:
            graphs = graphs_choice(self.cuda_graphs, self.device)
            compiled = compile_choice(self.compile, self.device)
            # the update is captured only with an optimizer that can be (torch's; not SB3's RMSpropTFLike)
            captured_update = graphs and make_capturable(self.policy.optimizer)
            forward, loss = self.policy.forward, self._loss
            if compiled:
                forward, loss = torch.compile(forward), torch.compile(loss)

            def act(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                with torch.no_grad(), unchecked_distributions():
                    return forward(obs)

            def update(*tensors: torch.Tensor) -> torch.Tensor:
                with unchecked_distributions():
                    total, statistics = loss(*tensors)
                self._apply_gradients(total)
                return statistics

            acting = StepGraph(act, graphs, "acting step")
            self._steps = (acting, StepGraph(update, captured_update, "update"))
        return self._steps

    def _apply_gradients(self, loss: torch.Tensor) -> None:
        """SB3's optimisation step: zero the gradients, backward, clip their norm, step."""
        self.policy.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.policy.optimizer.step()

    def _update_learning_rate(self, optimizers: Any) -> None:
        # as SB3's, written in place where the learning rate is a tensor (a captured optimizer reads it there)
        learning_rate = self.lr_schedule(self._current_progress_remaining)
        self.logger.record("train/learning_rate", learning_rate)
        for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
            set_learning_rate(optimizer, learning_rate)

    def _ent_coef_now(self) -> float:
        """``ent_coef`` for this update: the number SB3's classes take, or the value of a schedule of
        ``progress_remaining`` (as the learning rate's; logged as ``train/ent_coef``). The loss reads it from
        a tensor, so that a compiled or captured update follows the schedule."""
        if not callable(self.ent_coef):
            return float(self.ent_coef)
        value = float(self.ent_coef(self._current_progress_remaining))
        self.logger.record("train/ent_coef", value)
        return value

    def _fast(self, rollout_buffer: RolloutBuffer) -> bool:
        return isinstance(rollout_buffer, DeviceRolloutBuffer) and not self.use_sde

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        if not self._fast(rollout_buffer):
            return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps)
        assert self._last_obs is not None, "no previous observation: call learn() (it resets the envs)"
        assert isinstance(rollout_buffer, DeviceRolloutBuffer)
        act = self._learner_steps()[0]
        self.policy.set_training_mode(False)
        upload = self._uploader
        rollout_buffer.reset()
        callback.on_rollout_start()
        obs_tensor = upload("obs", self._last_obs)  # type: ignore[arg-type]
        starts = upload("starts", self._last_episode_starts, torch.float32)  # type: ignore[arg-type]
        n_steps = 0
        dones = self._last_episode_starts
        while n_steps < n_rollout_steps:
            actions_tensor, values, log_probs = act(obs_tensor)
            actions = actions_tensor.cpu().numpy()  # the one synchronisation of a step: the envs need them
            clipped_actions = actions
            if isinstance(self.action_space, spaces.Box):
                if self.policy.squash_output:
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
            env.step_async(clipped_actions)
            # while the envs step: this step's tensors into the buffer (queued device work, no waiting; it
            # is queued before the next acting step can overwrite a captured graph's outputs)
            pos = rollout_buffer.add_step(obs_tensor, actions_tensor.float(), starts, values, log_probs)
            new_obs, rewards, dones, infos = env.step_wait()
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1
            reward_tensor = upload("rewards", rewards, torch.float32)
            self._bootstrap_timeouts(reward_tensor, dones, infos)
            rollout_buffer.set_rewards(pos, reward_tensor)
            self._last_obs, self._last_episode_starts = new_obs, dones  # type: ignore[assignment]
            obs_tensor = upload("obs", new_obs)  # type: ignore[arg-type]
            starts = upload("starts", dones, torch.float32)
        with torch.no_grad():
            values = self.policy.predict_values(obs_tensor)
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=starts)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _bootstrap_timeouts(self, rewards: torch.Tensor, dones: np.ndarray, infos: list[dict]) -> None:
        """As SB3: an episode cut by a time limit gets ``gamma * V(terminal observation)`` added to its
        last reward (on the device; the host only reads the infos it has anyway)."""
        for idx, done in enumerate(dones):
            terminal = infos[idx].get("terminal_observation")
            if done and terminal is not None and infos[idx].get("TimeLimit.truncated", False):
                terminal_obs = self.policy.obs_to_tensor(terminal)[0]
                with torch.no_grad():
                    rewards[idx] += self.gamma * self.policy.predict_values(terminal_obs)[0, 0]

    def _evaluate(
        self, observations: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values, log_prob, entropy)`` of a minibatch's actions under the current policy, as SB3's
        PPO and A2C updates compute them (discrete actions as a flat long tensor, values flattened)."""
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        values, log_prob, entropy = self.policy.evaluate_actions(observations, actions)
        return values.flatten(), log_prob, entropy

    def _explained_variance(self) -> torch.Tensor:
        """SB3's explained variance of the rollout's values (numpy's population variance; nan when the
        returns do not vary), as a tensor on the device."""
        values, returns = self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten()
        var_returns = torch.var(returns, unbiased=False)
        explained = 1 - torch.var(returns - values, unbiased=False) / var_returns
        return torch.where(var_returns == 0, torch.full_like(explained, float("nan")), explained)


# the update's statistics, in the order of the tensor FastPPO._loss returns, and SB3's names for them
PPO_STATISTICS = {
    "pg": "policy_gradient_loss",
    "value": "value_loss",
    "entropy": "entropy_loss",
    "clip": "clip_fraction",
    "kl": "approx_kl",
    "loss": "loss",
}


class FastPPO(DeviceRollouts, PPO):
    """SB3's ``PPO`` with a device-resident rollout and a leaner loop (see the module docstring): the
    constructor of ``PPO`` plus ``compile`` and ``cuda_graphs`` (:class:`DeviceRollouts`)."""

    def _loss(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        old_values: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        coefs: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """SB3's PPO loss of one minibatch, and its statistics (``PPO_STATISTICS``) as one tensor.
        ``coefs``: ``[clip_range, clip_range_vf, ent_coef]`` (a tensor, so that a captured update follows
        their schedules)."""
        values, log_prob, entropy = self._evaluate(observations, actions)
        if self.normalize_advantage and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        clip_range = coefs[0]
        log_ratio = log_prob - old_log_prob
        ratio = torch.exp(log_ratio)
        clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
        policy_loss = -torch.min(advantages * ratio, advantages * clipped).mean()
        if self.clip_range_vf is None:
            values_pred = values
        else:
            values_pred = old_values + torch.clamp(values - old_values, -coefs[1], coefs[1])
        value_loss = F.mse_loss(returns, values_pred)
        entropy_loss = -torch.mean(-log_prob) if entropy is None else -torch.mean(entropy)
        loss = policy_loss + coefs[2] * entropy_loss + self.vf_coef * value_loss
        with torch.no_grad():
            clip_fraction = torch.mean((torch.abs(ratio - 1) > clip_range).float())
            approx_kl = torch.mean((ratio - 1) - log_ratio)
            statistics = torch.stack(
                [policy_loss, value_loss, entropy_loss, clip_fraction, approx_kl, loss]
            ).detach()
        return loss, statistics

    def train(self) -> None:
        if not isinstance(self.rollout_buffer, DeviceRolloutBuffer):  # SB3's train reads numpy buffers
            return super().train()
        update = self._learner_steps()[1]
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = float(self.clip_range(self._current_progress_remaining))  # type: ignore[operator]
        clip_range_vf = None
        if self.clip_range_vf is not None:
            clip_range_vf = float(self.clip_range_vf(self._current_progress_remaining))  # type: ignore[operator]
        coefs = torch.tensor([clip_range, clip_range_vf or 0.0, self._ent_coef_now()], device=self.device)
        statistics: list[torch.Tensor] = []  # every minibatch's, on the device until the update ends
        last_epoch = 0  # where the last epoch's minibatches start (SB3 logs the last epoch's KL)
        continue_training = True
        for _ in range(self.n_epochs):
            last_epoch = len(statistics)
            for batch in self.rollout_buffer.get(self.batch_size):
                tensors = (*batch, coefs)
                if self.target_kl is None:
                    statistics.append(update(*tensors).clone())  # clone: a graph's output is reused
                    continue
                # target_kl: this minibatch's KL is read before its step, as SB3 does
                with unchecked_distributions():
                    loss, minibatch = self._loss(*tensors)
                statistics.append(minibatch)
                if minibatch[4].item() > 1.5 * self.target_kl:
                    continue_training = False  # as SB3: this minibatch is not applied
                    break
                self._apply_gradients(loss)
            self._n_updates += 1  # as SB3: one "update" per epoch
            if not continue_training:
                break
        self._log_update(statistics, last_epoch, clip_range, clip_range_vf)

    def _log_update(
        self, statistics: list[torch.Tensor], last_epoch: int, clip_range: float, clip_range_vf: Any
    ) -> None:
        """SB3's ``train/*`` records, read from the device in one transfer: the means over the update's
        minibatches, the KL's over the last epoch's, the last minibatch's loss."""
        table = torch.stack(statistics)
        means = table.mean(dim=0)
        kl = table[last_epoch:, 4].mean()
        explained = self._explained_variance()[None]
        host = torch.cat([means[:4], kl[None], table[-1, 5:], explained]).cpu().tolist()  # the one transfer
        for key, number in zip(PPO_STATISTICS, host, strict=False):
            self.logger.record(f"train/{PPO_STATISTICS[key]}", number)
        self.logger.record("train/explained_variance", host[-1])
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", torch.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
