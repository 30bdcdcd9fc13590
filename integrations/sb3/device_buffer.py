"""``DeviceRolloutBuffer``: PPO / A2C rollouts kept on the learner's device, advantages computed there.

:class:`~retro_atari_kit.integrations.sb3.fast_ppo.FastPPO` always uses it (``--preset gpu``).

SB3's ``RolloutBuffer`` keeps a rollout in numpy on the host: every step's values and log-probabilities
come back from the device, GAE runs in numpy, and every minibatch of frames is gathered on the host and
sent to the device again, ``n_epochs`` times per rollout. This buffer holds the rollout as torch tensors on
the model's device: uint8 frames (channels-last per frame, as ``ChannelsLastRolloutBuffer``), actions,
rewards, episode starts, values, log-probabilities, and the advantages and returns it computes there. A
minibatch is one gather on the device.

It speaks SB3's ``RolloutBuffer`` API for filling and sampling (``reset``, ``add`` with numpy or tensors,
``compute_returns_and_advantage``, ``get``), so SB3's ``collect_rollouts`` fills it (FastPPO's fallback
with ``use_sde``), and FastPPO adds tensors without leaving the device (:meth:`add_step`). It is not a
``rollout_buffer_class`` for SB3's own ``PPO`` / ``A2C``: their ``train`` reads the buffer's values and
returns as numpy arrays (explained variance), which these tensors are not. The values,
advantages and returns are SB3's (same GAE, float32), and ``get`` draws the same minibatch indices as
SB3's buffer for the same numpy seed (one ``np.random.permutation`` per call, SB3's env-major order).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.type_aliases import RolloutBufferSamples

__all__ = ["DeviceRolloutBuffer"]


def _tensor(value: Any, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``value`` (numpy, tensor, number) as a tensor of ``dtype`` on ``device`` (no copy when it is one)."""
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(value), device=device).to(dtype)


class DeviceRolloutBuffer(RolloutBuffer):
    """SB3's ``RolloutBuffer`` held as torch tensors on ``device`` (see the module docstring).

    Same constructor as SB3's ``RolloutBuffer``; FastPPO's (see the module docstring).
    Image observations ``(C, H, W)`` are stored ``(H, W, C)`` per frame and handed out as channels-last
    ``(B, C, H, W)`` uint8 tensors; other observations as they are.
    """

    observations: Any  # torch tensors here, numpy in SB3's buffer
    actions: Any
    rewards: Any
    returns: Any
    episode_starts: Any
    values: Any
    log_probs: Any
    advantages: Any

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: torch.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
    ) -> None:
        if isinstance(observation_space, spaces.Dict):
            raise TypeError("DeviceRolloutBuffer needs a Box observation space; use SB3's DictRolloutBuffer")
        self.channels_last = isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 3
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs)

    def reset(self) -> None:
        steps, envs, device = self.buffer_size, self.n_envs, self.device
        obs_dtype = torch.from_numpy(np.zeros(0, dtype=self.observation_space.dtype)).dtype
        if self.channels_last:
            c, h, w = self.obs_shape
            frames = torch.zeros((steps, envs, h, w, c), dtype=obs_dtype, device=device)
            self.observations = frames.permute(0, 1, 4, 2, 3)  # (steps, envs, C, H, W) view of it
        else:
            self.observations = torch.zeros((steps, envs, *self.obs_shape), dtype=obs_dtype, device=device)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros((steps, envs, *shape), dtype=torch.float32, device=device)

        self.actions = zeros(self.action_dim)
        self.rewards, self.returns, self.episode_starts = zeros(), zeros(), zeros()
        self.values, self.log_probs, self.advantages = zeros(), zeros(), zeros()
        self.generator_ready = False
        self.pos, self.full = 0, False

    def add_step(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        episode_starts: torch.Tensor,
        values: torch.Tensor,
        log_probs: torch.Tensor,
    ) -> int:
        """Store one vector step's tensors (already on the device; nothing is synchronised) without its
        rewards, which come back from the envs later (:meth:`set_rewards`). Returns the step's index."""
        pos = self.pos
        self.observations[pos].copy_(obs.reshape(self.observations.shape[1:]))
        self.actions[pos].copy_(actions.reshape(self.n_envs, self.action_dim))
        self.episode_starts[pos].copy_(episode_starts)
        self.values[pos].copy_(values.flatten())
        self.log_probs[pos].copy_(log_probs.flatten())
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True
        return pos

    def set_rewards(self, pos: int, rewards: torch.Tensor) -> None:
        """The rewards of step ``pos`` (a tensor on the device, bootstrapped timeouts included)."""
        self.rewards[pos].copy_(rewards)

    def add(
        self,
        obs: Any,
        action: Any,
        reward: Any,
        episode_start: Any,
        value: torch.Tensor,
        log_prob: torch.Tensor,
    ) -> None:
        """SB3's ``RolloutBuffer.add`` (numpy arrays or tensors), so SB3's own loops can fill it."""
        device = self.device
        if isinstance(self.action_space, spaces.Discrete):
            action = np.asarray(action).reshape((self.n_envs, self.action_dim))
        obs_tensor = obs if isinstance(obs, torch.Tensor) else torch.as_tensor(np.asarray(obs))
        pos = self.add_step(
            obs_tensor.to(device),
            _tensor(action, device),
            _tensor(episode_start, device),
            _tensor(value, device),
            _tensor(log_prob, device),
        )
        self.set_rewards(pos, _tensor(reward, device))

    @torch.no_grad()
    def compute_returns_and_advantage(self, last_values: torch.Tensor, dones: Any) -> None:
        """GAE(lambda) advantages and TD(lambda) returns, on the device, as SB3's buffer computes them."""
        last_values = _tensor(last_values, self.device).flatten()
        next_non_terminal = 1.0 - _tensor(dones, self.device)
        next_values = last_values
        last_gae = torch.zeros_like(last_values)
        for step in reversed(range(self.buffer_size)):
            if step < self.buffer_size - 1:
                next_non_terminal = 1.0 - self.episode_starts[step + 1]
                next_values = self.values[step + 1]
            delta = self.rewards[step] + self.gamma * next_values * next_non_terminal - self.values[step]
            last_gae = delta + self.gamma * self.gae_lambda * next_non_terminal * last_gae
            self.advantages[step] = last_gae
        torch.add(self.advantages, self.values, out=self.returns)

    def get(self, batch_size: int | None = None) -> Generator[RolloutBufferSamples, None, None]:
        assert self.full, "the rollout buffer is not full"
        total = self.buffer_size * self.n_envs
        # SB3's minibatches: a permutation of the env-major order (index = env * n_steps + step), drawn
        # from numpy's global RNG as SB3's buffer draws it; stored step-major here, so the indices map
        flat = np.random.permutation(total)
        step_major = (flat % self.buffer_size) * self.n_envs + flat // self.buffer_size
        indices = torch.as_tensor(step_major, device=self.device)
        self.generator_ready = True
        size = total if batch_size is None else batch_size
        for start in range(0, total, size):
            yield self._get_samples(indices[start : start + size])

    def _get_samples(self, batch_inds: Any, env: Any = None) -> RolloutBufferSamples:  # type: ignore[override]
        batch_inds = torch.as_tensor(batch_inds, device=self.device)
        steps_envs = self.buffer_size * self.n_envs
        if self.channels_last:
            frames = self.observations.permute(0, 1, 3, 4, 2).reshape(steps_envs, *self.obs_shape[1:], -1)
            observations = frames[batch_inds].permute(0, 3, 1, 2)  # one gather, (B, C, H, W) channels-last
        else:
            observations = self.observations.reshape(steps_envs, *self.obs_shape)[batch_inds]

        def flat(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.reshape(steps_envs)[batch_inds]

        return RolloutBufferSamples(
            observations,
            self.actions.reshape(steps_envs, self.action_dim)[batch_inds],
            flat(self.values),
            flat(self.log_probs),
            flat(self.advantages),
            flat(self.returns),
        )
