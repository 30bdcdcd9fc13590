"""``FastPPO``: SB3's PPO with a learner that keeps the device busy and the host out of its way.

::

    from retro_atari_kit.integrations.sb3 import KitCnnPolicy, cnn_policy_kwargs, make_vec_env
    from retro_atari_kit.integrations.sb3.fast_ppo import FastPPO
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=32, seed=0)
    model = FastPPO(KitCnnPolicy, venv, n_steps=128, batch_size=1024, n_epochs=4,
                    policy_kwargs=cnn_policy_kwargs("nature"), device="auto")
    model.learn(1_000_000)

or ``retrokit train ppo RetroKit/Pong-v0 --preset gpu-fast``. What differs from SB3's ``PPO``, all of it in
``collect_rollouts`` and ``train`` (docs/sb3.md, "FastPPO"):

- the rollout lives on the device (:class:`~retro_atari_kit.integrations.sb3.device_buffer.
  DeviceRolloutBuffer`): each step's uint8 frames go to the device once (through a pinned host buffer
  and a non-blocking copy on CUDA) and serve both the policy's forward and the buffer; values, log-probs,
  rewards, GAE and returns never leave it; minibatches are gathers on the device.
- one host synchronisation per env step, the actions the envs need. The envs start stepping
  (``step_async``) as soon as the actions are on the host, and the step's tensors are written into the
  buffer while they run.
- the update logs the same statistics as SB3's, summed on the device and read once per update instead of
  four ``.item()`` calls per minibatch (except with ``target_kl``, which needs each minibatch's KL).
- ``compile=True`` runs the CNN through ``torch.compile`` (``"auto"``: on CUDA only; the default on CPU,
  where compiling costs more than it saves in a short run). The module and its state dict are unchanged.

The update is SB3's: on the same rollout, weights and numpy seed it gives the same parameters as
``PPO.train`` (a test checks it). The class is a ``PPO``: save / load zips, callbacks, the logger
(progress.csv, tensorboard), ``learn`` and every ``retrokit`` feature work as with SB3's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from retro_atari_kit.integrations.sb3.device_buffer import DeviceRolloutBuffer
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

__all__ = ["DeviceRollouts", "FastPPO", "compile_choice"]


def compile_choice(compile: bool | str, device: torch.device) -> bool:  # noqa: A002 - torch's word
    """Whether to ``torch.compile`` the CNN: ``True`` / ``False`` as given, ``"auto"`` on CUDA only."""
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
    """The rollout half of the kit's fast on-policy learners (FastPPO, FastA2C), placed before SB3's class
    in the bases: a device-resident buffer, pinned non-blocking uploads, one sync per env step, envs
    stepping while the step is stored, optional ``torch.compile`` of the CNN (see the module docstring).

    Adds the constructor argument ``compile`` (``False``, ``True`` or ``"auto"``: CUDA only).
    ``rollout_buffer_class`` is always :class:`DeviceRolloutBuffer` (another class given is replaced, so
    that presets written for SB3's classes work unchanged); with ``use_sde`` the rollout is collected by
    SB3's loop (into the same buffer). Dict observations are refused (the buffer's TypeError).
    """

    def __init__(self, *args: Any, compile: bool | str = False, **kwargs: Any) -> None:  # noqa: A002
        kwargs["rollout_buffer_class"] = DeviceRolloutBuffer
        kwargs.pop("rollout_buffer_kwargs", None)
        self.compile = compile
        super().__init__(*args, **kwargs)

    def _setup_model(self) -> None:
        # also on load, where SB3 sets the stored / overriding attributes before calling this
        self.rollout_buffer_class, self.rollout_buffer_kwargs = DeviceRolloutBuffer, {}
        super()._setup_model()
        self._uploader = _Uploader(self.device)
        if compile_choice(self.compile, self.device):
            extractor = self.policy.features_extractor
            # compile the call, not the module: the state dict (and so every saved zip) keeps its keys
            extractor.forward = torch.compile(extractor.forward)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_uploader"]

    def _fast(self, rollout_buffer: RolloutBuffer) -> bool:
        return isinstance(rollout_buffer, DeviceRolloutBuffer) and not self.use_sde

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        if not self._fast(rollout_buffer):
            return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps)
        assert self._last_obs is not None, "no previous observation: call learn() (it resets the envs)"
        assert isinstance(rollout_buffer, DeviceRolloutBuffer)
        self.policy.set_training_mode(False)
        upload = self._uploader
        rollout_buffer.reset()
        callback.on_rollout_start()
        obs_tensor = upload("obs", self._last_obs)  # type: ignore[arg-type]
        starts = upload("starts", self._last_episode_starts, torch.float32)  # type: ignore[arg-type]
        n_steps = 0
        dones = self._last_episode_starts
        while n_steps < n_rollout_steps:
            with torch.no_grad():
                actions_tensor, values, log_probs = self.policy(obs_tensor)
            actions = actions_tensor.cpu().numpy()  # the one synchronisation of a step: the envs need them
            clipped_actions = actions
            if isinstance(self.action_space, spaces.Box):
                if self.policy.squash_output:
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
            env.step_async(clipped_actions)
            # while the envs step: this step's tensors into the buffer (queued device work, no waiting)
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

    def _evaluate(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values, log_prob, entropy)`` of a minibatch's actions under the current policy, as SB3's
        PPO and A2C updates compute them (discrete actions as a flat long tensor, values flattened)."""
        actions = batch.actions
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        values, log_prob, entropy = self.policy.evaluate_actions(batch.observations, actions)
        return values.flatten(), log_prob, entropy

    def _explained_variance(self) -> torch.Tensor:
        """SB3's explained variance of the rollout's values (numpy's population variance; nan when the
        returns do not vary), as a tensor on the device."""
        values, returns = self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten()
        var_returns = torch.var(returns, unbiased=False)
        explained = 1 - torch.var(returns - values, unbiased=False) / var_returns
        return torch.where(var_returns == 0, torch.full_like(explained, float("nan")), explained)


class FastPPO(DeviceRollouts, PPO):
    """SB3's ``PPO`` with a device-resident rollout and a leaner loop (see the module docstring): the
    constructor of ``PPO`` plus ``compile`` (:class:`DeviceRollouts`)."""

    def train(self) -> None:
        if not isinstance(self.rollout_buffer, DeviceRolloutBuffer):  # SB3's train reads numpy buffers
            return super().train()
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        clip_range_vf = None
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)  # type: ignore[operator]
        # per-minibatch statistics stay on the device until the update ends: no sync per minibatch
        stats: dict[str, list[torch.Tensor]] = {"pg": [], "value": [], "entropy": [], "clip": [], "kl": []}
        loss = torch.zeros((), device=self.device)
        continue_training = True
        for _ in range(self.n_epochs):
            stats["kl"] = []  # as SB3: the KL logged is the last epoch's
            for batch in self.rollout_buffer.get(self.batch_size):
                values, log_prob, entropy = self._evaluate(batch)
                advantages = batch.advantages
                if self.normalize_advantage and len(advantages) > 1:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                log_ratio = log_prob - batch.old_log_prob
                ratio = torch.exp(log_ratio)
                clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -torch.min(advantages * ratio, advantages * clipped).mean()
                if clip_range_vf is None:
                    values_pred = values
                else:
                    values_pred = batch.old_values + torch.clamp(
                        values - batch.old_values, -clip_range_vf, clip_range_vf
                    )
                value_loss = F.mse_loss(batch.returns, values_pred)
                entropy_loss = -torch.mean(-log_prob) if entropy is None else -torch.mean(entropy)
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
                with torch.no_grad():
                    approx_kl = torch.mean((ratio - 1) - log_ratio)
                    for key, value in (
                        ("pg", policy_loss),
                        ("value", value_loss),
                        ("entropy", entropy_loss),
                        ("clip", torch.mean((torch.abs(ratio - 1) > clip_range).float())),
                        ("kl", approx_kl),
                    ):
                        stats[key].append(value.detach())
                if self.target_kl is not None and approx_kl.item() > 1.5 * self.target_kl:
                    continue_training = False  # as SB3: this minibatch is not applied
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1  # as SB3: one "update" per epoch
            if not continue_training:
                break
        self._log_update(stats, loss, clip_range, clip_range_vf)

    def _log_update(
        self, stats: dict[str, list[torch.Tensor]], loss: torch.Tensor, clip_range: float, clip_range_vf: Any
    ) -> None:
        """SB3's ``train/*`` records, read from the device in one transfer."""
        explained = self._explained_variance()
        names = {"entropy": "entropy_loss", "pg": "policy_gradient_loss", "value": "value_loss"}
        names |= {"kl": "approx_kl", "clip": "clip_fraction"}
        nan = loss.new_tensor(float("nan"))
        means = [torch.stack(stats[key]).mean() if stats[key] else nan for key in names]
        host = torch.stack([*means, loss.detach(), explained]).cpu().tolist()  # the one transfer
        for name, number in zip(names.values(), host, strict=False):
            self.logger.record(f"train/{name}", number)
        loss_v, explained_v = host[-2:]
        self.logger.record("train/loss", loss_v)
        self.logger.record("train/explained_variance", explained_v)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", torch.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
