"""How much RAM (and VRAM) a run needs, checked against what the machine has before training starts."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from retro_atari_kit.integrations.sb3.algorithms import OFF_POLICY
from retro_atari_kit.integrations.sb3.presets import resolve_class

from retro_atari_kit.limits import available_memory
from retro_atari_kit.runs import RunError

# Resident memory of one env worker (python + emulator + wrapper buffers), measured roughly on ALE.
ENV_WORKER_BYTES = 90 * 2**20
# Python, torch and SB3 in the training process.
BASE_PROCESS_BYTES = 600 * 2**20
# CUDA context and the model's weights / optimizer state on the GPU.
CUDA_CONTEXT_BYTES = 200 * 2**20


def estimate_memory(config: dict[str, Any], obs_space: gym.Space) -> dict[str, int]:
    """Bytes of RAM the run needs by part (buffers, env workers, the training process) and ``total``."""
    obs_bytes = int(np.prod(obs_space.shape)) * np.dtype(obs_space.dtype).itemsize
    hp = config["hyperparams"]
    n_envs = config["n_envs"]
    est: dict[str, int] = {}
    if config["algo"] in OFF_POLICY:
        size = int(hp.get("buffer_size", 1_000_000))
        if _compact_replay(hp.get("replay_buffer_class")):
            frame = obs_bytes // max(1, obs_space.shape[0])  # one frame per transition, stacks rebuilt
            est["replay buffer"] = size * (frame + 16)
        else:
            copies = 1 if hp.get("optimize_memory_usage") else 2
            est["replay buffer"] = size * (copies * obs_bytes + 16)
    else:
        n_steps = int(hp.get("n_steps", 5 if config["algo"] == "a2c" else 2048))
        est["rollout buffer"] = n_steps * n_envs * (obs_bytes + 7 * 4)
        batch = int(hp.get("batch_size", n_steps * n_envs))
        est["minibatch tensors"] = batch * obs_bytes * 4 * 3  # float32 activations of a minibatch
    est["env workers"] = n_envs * ENV_WORKER_BYTES
    est["training process"] = BASE_PROCESS_BYTES
    est["total"] = sum(est.values())
    return est


def _compact_replay(value: Any) -> bool:
    """Whether a preset's ``replay_buffer_class`` (a name, a dotted path or a class) stores one frame per
    transition: the kit's compact buffer or a subclass of it."""
    if value is None:
        return False
    from retro_atari_kit.integrations.sb3.buffers import CompactReplayBuffer

    cls = resolve_class("replay_buffer_class", value)
    return isinstance(cls, type) and issubclass(cls, CompactReplayBuffer)


def estimate_vram(est: dict[str, int]) -> int:
    """Bytes of GPU memory: the minibatch tensors plus the CUDA context and model."""
    return est.get("minibatch tensors", 0) + CUDA_CONTEXT_BYTES


def format_bytes(n: float) -> str:
    """``123 B``, ``4 KB``, ``5.6 MB``, ``7.0 GB``."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def check_memory(est: dict[str, int], force: bool) -> str:
    """RunError if the estimate exceeds available RAM (unless ``force``); returns a one-line summary."""
    room = available_memory()  # the cgroup's (container, Slurm job) and ulimit -v's, not only the host's
    available = room.amount
    parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in est.items() if k != "total")
    summary = f"estimated RAM {format_bytes(est['total'])} ({parts}); available {format_bytes(available)}"
    if est["total"] > available and not force:
        raise RunError(
            f"run needs ~{format_bytes(est['total'])} RAM but only {format_bytes(available)} is available "
            f"({room.limit}); "
            "use --set buffer_size=... / --n-envs ... to shrink it, or --force to try anyway"
        )
    return summary
