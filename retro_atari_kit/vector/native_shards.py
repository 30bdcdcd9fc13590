"""The native ALE backend's entry point: every env in this process, or ``shards`` worker processes that
each drive a contiguous block of envs.

Why workers: in one process the exact warp of every frame runs under one GIL, so the backend stops
scaling with cores (docs/performance.md has the figures). Each worker runs a
:class:`~retro_atari_kit.vector.native_ale.NativeDriver` over its block: its one thread sends its envs'
actions, then receives and warps each frame as soon as its env is done, while the block's other envs (C++
threads) still emulate. Workers share no GIL, so the warp scales with the cores.

Frames are those of the in-process native backend, bit for bit: each worker runs the same driver, whose
warp writes straight into shared memory; env ``i`` of the vector env is env ``i - lo`` of its block, with
the same seed. The workers, their shared memory, their wake-up and their errors: :mod:`._pool`.
"""

from __future__ import annotations

import os
import warnings
from functools import partial
from typing import Any

from gymnasium.vector import AutoresetMode

from retro_atari_kit.errors import as_int
from retro_atari_kit.processes import ChildDiedError
from retro_atari_kit.vector._pool import Block, WorkerDriver, WorkerVectorEnv
from retro_atari_kit.vector._stacked import StackedVectorEnv
from retro_atari_kit.vector.native_ale import NativeDriver

MIN_CORES = 8  # below this many cores the default keeps every env in this process


def default_shards(num_envs: int, cores: int | None = None) -> int:
    """On :data:`MIN_CORES` cores or more, one worker process per core with at least two envs each; on
    fewer, 1 (every env in this process).

    The figures behind both sides of the threshold: docs/vectorization.md, "native over worker processes".
    """
    cores = cores or os.cpu_count() or 1
    if cores < MIN_CORES:
        return 1
    return max(1, min(cores, num_envs // 2))


def check_shards(shards: Any, num_envs: int) -> int:
    """``shards`` as given (an int from 1 to ``num_envs``), or :func:`default_shards` for None."""
    if shards is None:
        return default_shards(num_envs)
    count = as_int(shards)  # numpy integers too
    if count is None or not 1 <= count <= num_envs:
        raise ValueError(
            f"shards must be an int from 1 (all envs in this process) to num_envs={num_envs}, got {shards!r}"
        )
    return count


def blocks(num_envs: int, shards: int) -> list[tuple[int, int]]:
    """The contiguous ``[lo, hi)`` env blocks of ``shards`` workers, sizes differing by at most one."""
    bounds = [num_envs * s // shards for s in range(shards + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def native_driver_in_worker(game: str, num_envs: int, cfg: dict[str, Any]) -> NativeDriver:
    """A worker's :class:`NativeDriver` over its block, its thread under ``SCHED_BATCH``.

    Woken by its semaphore, this thread then does not preempt the main process before it has woken the other
    workers (docs/vectorization.md has the cost of a wake-up with and without it). Set before the
    emulators start: their C++ threads inherit it.
    """
    if hasattr(os, "SCHED_BATCH"):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    return NativeDriver(game, num_envs, cfg)


def make_native_vector_env(
    game: str,
    num_envs: int,
    autoreset_mode: AutoresetMode,
    cfg: dict[str, Any],
    shards: int,
    defaulted: bool,
    start_method: str | None = None,
) -> StackedVectorEnv:
    """The native backend from resolved kwargs the native driver can express (``validate_ale_kwargs``,
    checked with ``native_incompatibilities``): in this process (``shards=1``) or over ``shards`` workers
    (:func:`check_shards`'s count).

    Workers that cannot start when ``shards`` was left to the default (``defaulted``; most often a script
    without a main guard, whose workers re-run it) do not fail the call: a ``UserWarning`` says why and how to
    get the workers, and every env runs in this process, with the same observations.
    """
    if shards > 1:
        workers = [
            Block(
                lo,
                hi,
                partial(native_driver_in_worker, game, hi - lo, cfg),
                f"envs {lo}-{hi - 1} (RetroKit/{game}-v0): their worker process",
            )
            for lo, hi in blocks(num_envs, shards)
        ]
        try:
            driver = WorkerDriver(workers, "native", "retrokit-shard", start_method)
            return WorkerVectorEnv(driver, cfg["frame_stack"], autoreset_mode, "native")
        except ChildDiedError as exc:
            if not (defaulted and exc.while_starting):
                raise
            warnings.warn(
                f"RetroKit/{game}-v0: the native backend's {shards} worker processes (the default on "
                f"{os.cpu_count()} cores) could not start, so every env runs in this process (the same "
                f"observations, fewer env steps/s on many cores): {exc}. Pass shards=1 to skip the workers.",
                UserWarning,
                stacklevel=4,
            )
    driver = NativeDriver(game, num_envs, cfg)
    return StackedVectorEnv(driver, cfg["frame_stack"], autoreset_mode, "native")
