"""``ChannelsLastRolloutBuffer``: PPO / A2C rollouts whose frame batches come out channels-last, uncopied.

::

    from stable_baselines3 import PPO
    from retro_atari_kit.integrations.sb3 import ChannelsLastRolloutBuffer, KitCnnPolicy, cnn_policy_kwargs
    model = PPO(KitCnnPolicy, venv, policy_kwargs=cnn_policy_kwargs("nature"),
                rollout_buffer_class=ChannelsLastRolloutBuffer)

SB3's ``RolloutBuffer`` keeps frames as ``(C, H, W)`` and hands every minibatch out through a numpy gather
and a second copy in ``torch.tensor``; a channels-last network then permutes the batch a third time before
casting it to float. This buffer stores the same uint8 frames ``(H, W, C)`` in memory (each frame is
transposed once, when it is added) and returns each minibatch as a tensor of logical shape ``(B, C, H, W)``
in ``torch.channels_last`` layout, built from the one gather: the kit's extractors then only cast it.
That saves two copies every time a frame is sampled (``n_epochs`` = 4 times per rollout with the zoo
settings) for one transposed write when it is added, so minibatches are cheaper to prepare (figures in
``docs/performance.md``).

Everything else is SB3's ``RolloutBuffer``: the same values, advantages and returns, the same minibatch
indices for the same numpy seed, observations still uint8 (and still sent to a GPU as uint8).
``observations`` keeps its ``(n_steps, n_envs, C, H, W)`` shape as a view of the channels-last storage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.type_aliases import RolloutBufferSamples

__all__ = ["ChannelsLastRolloutBuffer"]


class ChannelsLastRolloutBuffer(RolloutBuffer):
    """SB3's ``RolloutBuffer`` for channel-first image observations, stored and sampled channels-last.

    Same constructor as SB3's ``RolloutBuffer``; pass it as ``rollout_buffer_class`` to PPO or A2C (the
    kit's PPO and A2C presets do). The observation space must be a ``Box`` of shape ``(C, H, W)``.
    """

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
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 3:
            raise TypeError(
                "ChannelsLastRolloutBuffer needs a Box of channel-first images (C, H, W), got "
                f"{observation_space}; use SB3's RolloutBuffer for other observations"
            )
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs)

    def reset(self) -> None:
        super().reset()
        c, h, w = self.obs_shape
        frames = np.zeros((self.buffer_size, self.n_envs, h, w, c), dtype=self.observation_space.dtype)
        # the (C, H, W) view SB3's add() writes through; the memory underneath is (H, W, C) per frame
        self.observations = frames.transpose(0, 1, 4, 2, 3)

    def swap_and_flatten(self, arr: np.ndarray) -> np.ndarray:  # type: ignore[override]
        if arr is not self.observations:
            return RolloutBuffer.swap_and_flatten(arr)
        # (n_steps, n_envs, H, W, C) -> (n_envs * n_steps, H, W, C) in SB3's order, seen as (C, H, W)
        frames = np.moveaxis(arr, 2, -1).swapaxes(0, 1)
        return frames.reshape(-1, *frames.shape[2:]).transpose(0, 3, 1, 2)

    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> RolloutBufferSamples:
        frames = np.moveaxis(self.observations, 1, -1)[batch_inds]  # one gather, C-contiguous (B, H, W, C)
        observations = torch.as_tensor(frames, device=self.device).permute(0, 3, 1, 2)
        data = (
            self.actions[batch_inds].astype(np.float32, copy=False),  # as SB3: float actions
            self.values[batch_inds].flatten(),
            self.log_probs[batch_inds].flatten(),
            self.advantages[batch_inds].flatten(),
            self.returns[batch_inds].flatten(),
        )
        return RolloutBufferSamples(observations, *(self.to_torch(array) for array in data))
