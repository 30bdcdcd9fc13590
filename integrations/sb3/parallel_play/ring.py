"""The shared-memory ring between the play process and the trainer, and the shared weights buffer.

Layout (all arrays are views of torch tensors in shared memory, so the frames never go through pickle):

- ``frame``     ``(R, n, C, H, W)`` uint8: per vector step and env, the newest frame of the transition's next
  observation (the terminal observation when the episode ended). One frame per transition, as the
  compact replay stores it; the trainer rebuilds the stacks from the previous observation.
- ``reset_obs`` ``(R, n, k*C, H, W)`` uint8: the first observation of the next episode, written only when
  the step ended an episode.
- ``action``, ``reward``, ``done``, ``truncated``: per step and env.
- ``episode``, ``ep_r``, ``ep_l``, ``ep_t``: the true-score episode record (``info["episode"]``) when a game
  ended on that step.
- ``first_obs`` ``(n, k*C, H, W)``: the observation after a reset command.
- ``counters`` int64, each written by one side only: ``PRODUCED`` (steps written, by the player),
  ``CONSUMED`` (steps read, by the trainer), ``ALLOWED`` (how many steps the player may have produced, by
  the trainer), ``WEIGHTS`` (the weights' version, by the trainer: odd while being written).

Slot ``s % R`` holds step ``s`` (0-based count since the player started). The player writes a slot only while
``PRODUCED - CONSUMED < R`` and ``PRODUCED < ALLOWED``; it bumps ``PRODUCED`` after the slot is complete. A
single writer per counter and aligned 8-byte stores make this safe without locks on x86-64 (total store
order) -- the only platform this was tested on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

PRODUCED, CONSUMED, ALLOWED, WEIGHTS = range(4)
N_COUNTERS = 8


@dataclass(frozen=True)
class RingShape:
    """Sizes of the ring: ``slots`` vector steps of ``n_envs`` envs, frames of ``frame_channels`` x H x W,
    observations of ``stack`` frames."""

    slots: int
    n_envs: int
    stack: int
    frame_channels: int
    height: int
    width: int


def allocate(shape: RingShape) -> dict[str, torch.Tensor]:
    """Fresh shared-memory tensors for the ring (send them to the player through a multiprocessing pipe)."""
    r, n, k, c, h, w = (
        shape.slots,
        shape.n_envs,
        shape.stack,
        shape.frame_channels,
        shape.height,
        shape.width,
    )
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
        "frame": ((r, n, c, h, w), torch.uint8),
        "reset_obs": ((r, n, k * c, h, w), torch.uint8),
        "action": ((r, n), torch.int64),
        "reward": ((r, n), torch.float32),
        "done": ((r, n), torch.bool),
        "truncated": ((r, n), torch.bool),
        "episode": ((r, n), torch.bool),
        "ep_r": ((r, n), torch.float64),
        "ep_l": ((r, n), torch.int64),
        "ep_t": ((r, n), torch.float64),
        "first_obs": ((n, k * c, h, w), torch.uint8),
        "counters": ((N_COUNTERS,), torch.int64),
    }
    return {name: torch.zeros(size, dtype=dtype).share_memory_() for name, (size, dtype) in spec.items()}


def views(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """numpy views of the ring's tensors (no copy)."""
    return {name: t.numpy() for name, t in tensors.items()}


# --------------------------------------------------------------------------------------------------------
# Weights: a flat float32 buffer in shared memory, written by the trainer, read by the player
# --------------------------------------------------------------------------------------------------------


def weights_numel(module: torch.nn.Module) -> int:
    return sum(t.numel() for t in module.state_dict().values())


def write_weights(module: torch.nn.Module, flat: torch.Tensor, counters: np.ndarray) -> None:
    """Copy ``module``'s state into ``flat`` under a sequence lock: the version is odd while writing, so a
    reader that sees an odd or changed version knows its copy may be torn and retries."""
    counters[WEIGHTS] += 1
    offset = 0
    with torch.no_grad():
        for tensor in module.state_dict().values():
            n = tensor.numel()
            # copy_ handles any memory format (channels-last weights) and device (a GPU's weights come to
            # the host synchronously here, so the version is only bumped once the bytes are in place)
            flat[offset : offset + n].view(tensor.shape).copy_(tensor)
            offset += n
    counters[WEIGHTS] += 1


def read_weights(module: torch.nn.Module, flat: torch.Tensor, counters: np.ndarray, version: int) -> int:
    """Load ``flat`` into ``module`` if the trainer published a version newer than ``version``; returns the
    version now held. Retries while the trainer is writing (a write takes about a millisecond)."""
    while True:
        start = int(counters[WEIGHTS])
        if start == version:
            return version
        if start % 2:
            time.sleep(0.0002)  # being written
            continue
        offset = 0
        with torch.no_grad():
            for tensor in module.state_dict().values():
                n = tensor.numel()
                tensor.copy_(flat[offset : offset + n].view(tensor.shape))
                offset += n
        if int(counters[WEIGHTS]) == start:
            return start
