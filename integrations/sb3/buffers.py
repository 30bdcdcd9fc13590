"""``CompactReplayBuffer``: DQN replay that stores each frame once and rebuilds frame stacks when sampling.

::

    from stable_baselines3 import DQN
    from retro_atari_kit.integrations.sb3 import CompactReplayBuffer, make_vec_env
    model = DQN("CnnPolicy", make_vec_env("RetroKit/Pong-v0", n_envs=1), buffer_size=1_000_000,
                replay_buffer_class=CompactReplayBuffer)

What is stored, per transition and env: the newest frame of ``obs`` (one ``(C, H, W)`` frame, not the
``k`` stacked ones, and no separate ``next_obs``), the action, reward, done, time-limit flag, and how far
back the current episode reaches (0..k-1). A transition's ``next_obs`` is the next slot's stack, except
when the episode ended (terminated or truncated): then the newest frame of the terminal observation is kept
in a small side store (one frame per episode end). Stacks never reach across an episode boundary: frames
before the episode's first observation are the first frame repeated (the kit's ``FrameStack``) or zeros
(SB3's ``VecFrameStack``); which one is detected from each episode's first observation.

Sampling gathers all frames of a batch with one vectorised fancy-index per stack. Samples equal those of
SB3's ``ReplayBuffer`` fed the same transitions (same indices), including ``dones * (1 - timeouts)``, so
time-limit truncation is handled (SB3 refuses that with ``optimize_memory_usage``). When full, the ``k``
oldest slots are not sampled (their frame history has been overwritten), like SB3's memory-optimised
buffer skips one.

Memory for 1M transitions of Pong (84x84 gray, 4 stacked): ~7.1 GB (``estimate_nbytes``); SB3's
``ReplayBuffer`` ~56 GB, ~28 GB with ``optimize_memory_usage``.

With ``n_steps > 1`` (SB3's ``n_steps`` for DQN, passed as ``replay_buffer_kwargs``; the kit's presets do
that for you) a sample is an n-step transition: the discounted sum of up to ``n_steps`` rewards, the
observation ``n_steps`` later and ``discounts = gamma ** m`` for the ``m`` rewards summed. The window stops at
the episode's end (terminated or truncated) and at the newest stored transition, as SB3's
``NStepReplayBuffer``, whose samples these equal.

On CUDA, samples are gathered straight into pinned (page-locked) host memory from torch's caching host
allocator and copied with ``non_blocking=True``; observations cross as uint8.

Every ``add`` checks that the observations really are frame stacks that continue one another (a cheap
comparison of a few KB) and raises ``ValueError`` otherwise, so a non-stacked env cannot silently give
wrong samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer, ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples

from retro_atari_kit.errors import as_int

__all__ = ["CompactReplayBuffer"]


class CompactReplayBuffer(ReplayBuffer):
    """Replay buffer storing one frame per transition; a drop-in ``replay_buffer_class`` for DQN / QR-DQN.

    :param buffer_size: transitions kept (over all envs, as SB3's ``ReplayBuffer``)
    :param observation_space: uint8 Box ``(k * frame_channels, H, W)`` of stacked frames, channel first
    :param action_space: the action space
    :param device: torch device of the samples
    :param n_envs: number of envs adding transitions together
    :param optimize_memory_usage: accepted for SB3 compatibility and ignored (this buffer already stores
        every frame once)
    :param handle_timeout_termination: as SB3: time-limit truncation is not a terminal state
    :param frame_channels: channels per frame (1 for grayscale, 3 for RGB stacks)
    :param n_steps: rewards summed per sample (1: plain one-step transitions)
    :param gamma: discount of the n-step sum (only used with ``n_steps > 1``)
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: torch.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        frame_channels: int = 1,
        n_steps: int = 1,
        gamma: float = 0.99,
    ) -> None:
        steps = as_int(n_steps)  # numpy integers too
        if steps is None or steps < 1:
            raise ValueError(f"n_steps={n_steps!r} must be a positive int")
        n_steps = steps
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r} must be in (0, 1]")
        stack, c, h, w = self._check_space(observation_space, frame_channels)
        # BaseBuffer only: ReplayBuffer.__init__ would allocate full obs / next_obs arrays
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device, n_envs=n_envs)
        self.buffer_size = max(buffer_size // n_envs, 1)
        if self.buffer_size <= stack + 1:
            raise ValueError(
                f"buffer_size={buffer_size} is too small for {n_envs} env(s) and {stack} "
                f"stacked frames; use at least {(stack + 2) * n_envs}"
            )
        self.optimize_memory_usage = False
        self.n_steps = n_steps
        self.gamma = gamma
        self.handle_timeout_termination = handle_timeout_termination
        self.stack = stack
        self.frame_channels = c
        n, b = self.n_envs, self.buffer_size
        self.frames = np.zeros((b, n, c, h, w), dtype=np.uint8)
        self.actions = np.zeros((b, n, self.action_dim), dtype=self._maybe_cast_dtype(action_space.dtype))
        self.rewards = np.zeros((b, n), dtype=np.float32)
        self.dones = np.zeros((b, n), dtype=np.float32)
        self.timeouts = np.zeros((b, n), dtype=np.float32)
        # how many earlier frames of the same episode the slot's stack may use (0..k-1)
        self.history = np.zeros((b, n), dtype=np.uint8)
        # the episode's first stack was padded with zeros (SB3 VecFrameStack) instead of the repeated frame
        self.zero_pad = np.zeros((b, n), dtype=bool)
        # index into terminal_frames for transitions that ended an episode, else -1
        self.terminal_index = np.full((b, n), -1, dtype=np.int64)
        self.terminal_frames = np.zeros((max(16, 2 * n), c, h, w), dtype=np.uint8)
        self._free_terminal = list(range(len(self.terminal_frames) - 1, -1, -1))
        self._episode_len = np.full(n, -1, dtype=np.int64)  # -1: the next add starts an episode
        self._episode_zero_pad = np.zeros(n, dtype=bool)
        self._expected_obs = np.zeros((n, *self.obs_shape), dtype=np.uint8)

    # ------------------------------------------------------------------------------------------------------
    @staticmethod
    def _check_space(observation_space: spaces.Space, frame_channels: int) -> tuple[int, int, int, int]:
        if (
            not isinstance(observation_space, spaces.Box)
            or observation_space.dtype != np.uint8
            or len(observation_space.shape) != 3
        ):
            raise TypeError(
                "CompactReplayBuffer needs a uint8 Box of channel-first stacked frames "
                f"(k*C, H, W), got {observation_space}; use SB3's ReplayBuffer otherwise"
            )
        channels = as_int(frame_channels)  # numpy integers too
        if channels is None or channels < 1 or observation_space.shape[0] % channels:
            raise ValueError(
                f"frame_channels={frame_channels!r} must be a positive int dividing the "
                f"observation's {observation_space.shape[0]} channels (1 gray, 3 RGB)"
            )
        frame_channels = channels
        k = observation_space.shape[0] // frame_channels
        _, h, w = observation_space.shape
        return k, frame_channels, h, w

    @classmethod
    def estimate_nbytes(
        cls,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        n_envs: int = 1,
        frame_channels: int = 1,
    ) -> int:
        """Bytes of the fixed arrays for ``buffer_size`` transitions (terminal frames excluded: one frame per
        episode end, typically < 1% of transitions)."""
        _, c, h, w = cls._check_space(observation_space, frame_channels)
        slots = max(buffer_size // n_envs, 1) * n_envs
        action_dim = int(np.prod(action_space.shape)) if action_space.shape else 1
        action_bytes = np.dtype(cls._maybe_cast_dtype(action_space.dtype)).itemsize * action_dim
        # frame + action + reward, done, timeout (float32) + history, zero_pad (1 byte) + terminal_index
        return slots * (c * h * w + action_bytes + 3 * 4 + 2 + 8)

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffer's arrays now (terminal frames included)."""
        arrays = (
            self.frames,
            self.actions,
            self.rewards,
            self.dones,
            self.timeouts,
            self.history,
            self.zero_pad,
            self.terminal_index,
            self.terminal_frames,
        )
        return int(sum(a.nbytes for a in arrays))

    # ------------------------------------------------------------------------------------------------------
    def _terminal_slot(self) -> int:
        if not self._free_terminal:
            old = len(self.terminal_frames)
            grown = np.zeros((old * 2, *self.terminal_frames.shape[1:]), dtype=np.uint8)
            grown[:old] = self.terminal_frames
            self.terminal_frames = grown
            self._free_terminal = list(range(2 * old - 1, old - 1, -1))
        return self._free_terminal.pop()

    def _keep_next_frame(self, slot: int, e: int) -> None:
        if self.terminal_index[slot, e] < 0:
            idx = self._terminal_slot()
            self.terminal_frames[idx] = self._expected_obs[e][-self.frame_channels :]
            self.terminal_index[slot, e] = idx

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        c, k = self.frame_channels, self.stack
        obs = np.asarray(obs).reshape((self.n_envs, *self.obs_shape))
        next_obs = np.asarray(next_obs).reshape((self.n_envs, *self.obs_shape))
        done_b = np.asarray(done).reshape(self.n_envs).astype(bool)
        pos = self.pos
        for e in range(self.n_envs):
            old = self.terminal_index[pos, e]
            if old >= 0:
                self._free_terminal.append(int(old))
                self.terminal_index[pos, e] = -1
            o = obs[e]
            if self._episode_len[e] >= 0 and not np.array_equal(o, self._expected_obs[e]):
                # the env was reset without a done (a new learn() call, a resumed run): the previous
                # transition keeps its true next frame in the side store; this obs must start an episode
                self._keep_next_frame((pos - 1) % self.buffer_size, e)
                self._episode_len[e] = -1
            if self._episode_len[e] < 0:  # first observation of an episode: a padded stack
                newest = o[-c:]
                if k > 1 and not np.any(o[:-c]):
                    self._episode_zero_pad[e] = True
                elif all(np.array_equal(o[i * c : (i + 1) * c], newest) for i in range(k - 1)):
                    self._episode_zero_pad[e] = False
                else:
                    raise ValueError(
                        f"env {e}: obs is neither the previous transition's next_obs nor the first "
                        "observation of an episode (a stack padded with its first frame or zeros); "
                        "CompactReplayBuffer needs consecutive stacked-frame observations of each env "
                        "(RetroKit/ envs, or SB3 VecFrameStack); use SB3's ReplayBuffer otherwise"
                    )
                self._episode_len[e] = 0
            if k > 1 and not np.array_equal(next_obs[e][:-c], o[c:]):
                raise ValueError(
                    f"env {e}: next_obs is not obs shifted by one frame; CompactReplayBuffer "
                    "needs stacked-frame observations; use SB3's ReplayBuffer otherwise"
                )
            self.frames[pos, e] = o[-c:]
            self.history[pos, e] = min(int(self._episode_len[e]), k - 1)
            self.zero_pad[pos, e] = self._episode_zero_pad[e]
            if done_b[e]:
                slot = self._terminal_slot()
                self.terminal_frames[slot] = next_obs[e][-c:]
                self.terminal_index[pos, e] = slot
                self._episode_len[e] = -1
            else:
                self._episode_len[e] += 1
                self._expected_obs[e] = next_obs[e]
        self.actions[pos] = np.asarray(action).reshape((self.n_envs, self.action_dim))
        self.rewards[pos] = np.asarray(reward).reshape(self.n_envs)
        self.dones[pos] = done_b
        if self.handle_timeout_termination:
            self.timeouts[pos] = [info.get("TimeLimit.truncated", False) for info in infos]
        # the next obs's newest frame goes into the next slot now, so the newest transition can be sampled;
        # the next add writes the same frame there again (checked above)
        nxt = (pos + 1) % self.buffer_size
        live = ~done_b
        if live.any():
            self.frames[nxt, live] = next_obs[live][:, -c:]
        self.pos = nxt
        if self.pos == 0:
            self.full = True

    # ------------------------------------------------------------------------------------------------------
    def valid_indices(self) -> np.ndarray:
        """Slot indices that can be sampled (all filled ones, minus the ``k`` oldest when full)."""
        if not self.full:
            return np.arange(self.pos)
        return (self.pos + self.stack + np.arange(self.buffer_size - self.stack)) % self.buffer_size

    def sample(self, batch_size: int, env: Any = None) -> ReplayBufferSamples:
        if self.full:
            offsets = np.random.randint(0, self.buffer_size - self.stack, size=batch_size)
            batch_inds = (self.pos + self.stack + offsets) % self.buffer_size
        else:
            if self.pos == 0:
                raise ValueError("cannot sample from an empty CompactReplayBuffer")
            batch_inds = np.random.randint(0, self.pos, size=batch_size)
        return self._get_samples(batch_inds, env=env)

    def _stack(
        self,
        newest: np.ndarray,
        env_inds: np.ndarray,
        history: np.ndarray,
        zero_pad: np.ndarray,
        out: np.ndarray,
    ) -> None:
        """Write the stacks ending at slots ``newest`` (next_obs: one past) into ``out`` (B, k*C, H, W)."""
        k, c, b = self.stack, self.frame_channels, self.buffer_size
        back = np.arange(k - 1, -1, -1)  # frame j of the stack is `back[j]` steps before the newest
        reach = np.minimum(back[None, :], history[:, None])  # clip to the episode's first frame
        src = (newest[:, None] - reach) % b
        view = out.reshape(len(newest), k, c, *out.shape[2:])
        view[:] = self.frames[src, env_inds[:, None]]
        pad = (back[None, :] > history[:, None]) & zero_pad[:, None]
        if pad.any():
            view[pad] = 0

    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> ReplayBufferSamples:
        batch_inds = np.asarray(batch_inds, dtype=np.int64)
        env_inds = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))
        n = len(batch_inds)
        cuda = self.device.type == "cuda"
        obs_t = self._host((n, *self.obs_shape), torch.uint8, cuda)
        next_t = self._host((n, *self.obs_shape), torch.uint8, cuda)
        obs_np, next_np = obs_t.numpy(), next_t.numpy()
        hist = self.history[batch_inds, env_inds].astype(np.int64)
        pad = self.zero_pad[batch_inds, env_inds]
        self._stack(batch_inds, env_inds, hist, pad, obs_np)
        if self.n_steps == 1:
            last, discounts = batch_inds, None
            rewards = self.rewards[batch_inds, env_inds].reshape(-1, 1)
            if env is not None:
                rewards = self._normalize_reward(rewards, env)
            timeouts = self.timeouts[last, env_inds]
        else:
            offset, rewards, discounts, timeouts = self._n_step(batch_inds, env_inds, env)
            last = (batch_inds + offset) % self.buffer_size
            hist = hist + offset
        # next_obs: the same episode one step past `last`; its newest frame is the next slot's, or the
        # terminal frame
        self._stack(last + 1, env_inds, np.minimum(hist + 1, self.stack - 1), pad, next_np)
        term = self.terminal_index[last, env_inds]
        ended = term >= 0
        if ended.any():
            next_np[ended, -self.frame_channels :] = self.terminal_frames[term[ended]]
        dones = (self.dones[last, env_inds] * (1 - timeouts)).reshape(-1, 1)
        actions = self.actions[batch_inds, env_inds]
        if env is not None:  # VecNormalize: SB3's own conversion (gives float observations)
            obs_out = self.to_torch(self._normalize_obs(obs_np, env))
            next_out = self.to_torch(self._normalize_obs(next_np, env))
            actions_t, dones_t, rewards_t = map(self.to_torch, (actions, dones, rewards))
        else:
            obs_out, next_out = self._move(obs_t, cuda), self._move(next_t, cuda)
            actions_t, dones_t, rewards_t = (self._move_np(a, cuda) for a in (actions, dones, rewards))
        discounts_t = None if discounts is None else self._move_np(discounts, cuda)
        return ReplayBufferSamples(obs_out, actions_t, next_out, dones_t, rewards_t, discounts_t)

    def _n_step(
        self, batch_inds: np.ndarray, env_inds: np.ndarray, env: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For each sample: how many slots past its own the n-step window ends (0..n-1), the discounted
        reward sum, ``gamma ** rewards summed`` and the time-limit flag of the window's last slot."""
        n, b = self.n_steps, self.buffer_size
        window = (batch_inds[:, None] + np.arange(n)[None, :]) % b
        envs = env_inds[:, None]
        timeouts = self.timeouts[window, envs]
        # the newest stored transition ends every window: the slots after it hold older, unrelated data;
        # it counts as a truncation there (bootstrap from its next obs), as in SB3's NStepReplayBuffer
        newest = window == (self.pos - 1) % b
        timeouts = np.where(newest & (self.dones[window, envs] == 0), 1.0, timeouts).astype(np.float32)
        # an episode also ends where its next frame sits in the side store (reset without a done)
        ends = (self.dones[window, envs] > 0) | (timeouts > 0) | (self.terminal_index[window, envs] >= 0)
        offset = np.where(ends.any(axis=1), ends.argmax(axis=1), n - 1)
        summed = np.arange(n)[None, :] <= offset[:, None]
        rewards = self.rewards[window, envs]
        if env is not None:
            rewards = self._normalize_reward(rewards, env)
        powers = self.gamma ** np.arange(n, dtype=np.float32)
        returns = (rewards * powers * summed).sum(axis=1, keepdims=True).astype(np.float32)
        discounts = self.gamma ** summed.sum(axis=1, keepdims=True).astype(np.float32)
        return offset, returns, discounts, timeouts[np.arange(len(offset)), offset]

    @staticmethod
    def _host(shape: tuple[int, ...], dtype: torch.dtype, cuda: bool) -> torch.Tensor:
        # pinned blocks come from torch's caching host allocator, which reuses a block only after the
        # asynchronous copies recorded on it have finished
        return torch.empty(shape, dtype=dtype, pin_memory=cuda)

    def _move(self, tensor: torch.Tensor, cuda: bool) -> torch.Tensor:
        return tensor.to(self.device, non_blocking=True) if cuda else tensor

    def _move_np(self, array: np.ndarray, cuda: bool) -> torch.Tensor:
        # the arrays are fresh results of fancy indexing: no copy needed on the CPU
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        if cuda:
            pinned = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            pinned.copy_(tensor)
            return pinned.to(self.device, non_blocking=True)
        return tensor
