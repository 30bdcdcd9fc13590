"""Single-frame replay for DQN on RLlib: each frame is stored once, stacks are built when they are used.

With the env stacking frames itself (``frame_stack=4``), every step RLlib keeps in an episode holds the
whole ``(4, 84, 84)`` stack: 4x the 7,056 bytes of one 84x84 frame, 28 GB per 1M transitions of replay.
``algo_config("dqn", ...)`` (``single_frame_replay``, on by default) runs the env at ``frame_stack=1``
instead, so episodes and the replay hold ``(1, 84, 84)`` frames, and

- :class:`FrameStackToModule`, an env-to-module connector on every env runner, gives the module the last
  ``frames`` frames of each episode, oldest first (the runner keeps ``frames - 1`` frames of lookback
  when it cuts an episode into chunks, so a stack never spans a gap);
- :class:`FrameStackEpisodeReplayBuffer`, an ``EpisodeReplayBuffer``, samples transitions as RLlib's does and
  then replaces each sampled observation and n-step next observation by its stack, read from the stored
  episode, so the learner gets ``(frames, 84, 84)`` uint8 batches.

Both pad an episode's first steps by repeating its first frame, which is what the kit's
:class:`~retro_atari_kit.wrappers.FrameStack` does after every reset (a life loss included): the module
sees exactly the observations it would see with ``frame_stack=4`` (tests compare them frame by frame).
RLlib's own ``FrameStacking*`` connectors stack channels-last ``(H, W, 1)`` frames and pad with zeros.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

__all__ = ["FrameStackEpisodeReplayBuffer", "FrameStackToModule", "frames_at", "last_frames", "stacked_space"]


def stacked_space(space: gym.spaces.Box, frames: int) -> gym.spaces.Box:
    """The Box of ``frames`` channel-first frames of ``space`` stacked on the channel axis."""
    return gym.spaces.Box(
        low=np.concatenate([space.low] * frames, axis=0),
        high=np.concatenate([space.high] * frames, axis=0),
        dtype=space.dtype,
    )


def last_frames(episode: Any, frames: int) -> np.ndarray:
    """The stack of an episode's last ``frames`` observations (lookback included), first frame repeated."""
    recent = list(episode.get_observations(indices=slice(-frames, None)))
    recent = [recent[0]] * (frames - len(recent)) + recent
    return np.concatenate(recent, axis=0)


def frames_at(episode: Any, t: int, frames: int) -> np.ndarray:
    """The stack ending at observation ``t`` of a stored episode; before its first stored frame (the start
    of its lookback, if any) that frame is repeated."""
    first = -episode.observations.lookback
    indices = [max(t - back, first) for back in range(frames - 1, -1, -1)]
    return np.concatenate(list(episode.get_observations(indices=indices, neg_index_as_lookback=True)), axis=0)


class FrameStackToModule(ConnectorV2):
    """Env-to-module connector: the module's observation is the stack of the episode's last ``frames``
    channel-first frames (see the module docstring). Episodes keep single frames."""

    def __init__(
        self,
        input_observation_space: gym.Space | None = None,
        input_action_space: gym.Space | None = None,
        *,
        frames: int = 4,
        **kwargs: Any,
    ) -> None:
        self.frames = int(frames)  # before the base class, which may compute the output space
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def recompute_output_observation_space(
        self, input_observation_space: gym.Space, input_action_space: gym.Space
    ) -> gym.Space:
        return stacked_space(input_observation_space, self.frames)

    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict | None = None,
        **kwargs: Any,
    ) -> Any:
        for episode in self.single_agent_episode_iterator(episodes):
            self.add_batch_item(batch, Columns.OBS, last_frames(episode, self.frames), episode)
        return batch


class StackerFactory:
    """``env_to_module_connector`` for RLlib's config: picklable (sent to every runner), RLlib calls it with
    ``(env, spaces, device)``."""

    def __init__(self, frames: int) -> None:
        self.frames = int(frames)

    def __call__(self, env: Any = None, spaces: Any = None, device: Any = None) -> FrameStackToModule:
        return FrameStackToModule(frames=self.frames)


class FrameStackEpisodeReplayBuffer(EpisodeReplayBuffer):
    """RLlib's uniform episode replay over single frames; sampled transitions carry stacked observations.

    Takes RLlib's ``EpisodeReplayBuffer`` arguments plus ``frames``. Only 1-step-long transitions (what DQN
    samples: ``sample_episodes=True`` without ``batch_length_T``) are supported.
    """

    def __init__(self, capacity: int = 10000, *, frames: int = 4, **kwargs: Any) -> None:
        super().__init__(capacity, **kwargs)
        self.frames = int(frames)
        self._stacked_space: gym.spaces.Box | None = None  # every stored episode has the env's frame space

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("sample_episodes") or kwargs.get("batch_length_T"):
            raise NotImplementedError(
                "this buffer samples single transitions (DQN); use single_frame_replay=false"
            )
        sampled = super().sample(*args, **kwargs)
        for chunk in sampled:
            self._stack(chunk, to_numpy=bool(kwargs.get("to_numpy")))
        return sampled

    def _stack(self, chunk: Any, to_numpy: bool) -> None:
        """Replace a sampled ``[o_t, o_(t+n)]`` by their stacks (``chunk.t_started`` is ``t`` in the stored
        episode; the n-step next observation is cut at the episode's end, as RLlib's sampling does)."""
        stored = self.episodes[self.episode_id_to_index[chunk.id_] - self._num_episodes_evicted]
        t = chunk.t_started
        n = int(chunk.get_extra_model_outputs("n_step", 0))
        pair = [frames_at(stored, t, self.frames), frames_at(stored, min(t + n, len(stored)), self.frames)]
        chunk.observations = InfiniteLookbackBuffer(np.stack(pair) if to_numpy else pair, lookback=0)
        if stored.observation_space is not None:
            if self._stacked_space is None:  # built once, not for each of the batch's transitions
                self._stacked_space = stacked_space(stored.observation_space, self.frames)
            chunk.observation_space = self._stacked_space  # sets the observations' space too
