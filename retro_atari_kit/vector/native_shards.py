"""The native ALE backend sharded over worker processes: each process drives a contiguous block of envs.

Why (docs/performance.md): in one process the exact warp of every frame runs under one GIL, which caps
the backend near 11,000 env steps/s on 16 cores whatever the core count. Here every worker process runs a
:class:`~retro_atari_kit.vector.native_ale.NativeDriver` over its block: its one thread sends its envs'
actions, then receives and warps each frame as soon as its env is done, while the block's other envs (C++
threads) still emulate. Workers share no GIL, so the warp scales with the cores.

Frames are those of the in-process native backend, bit for bit: each worker runs the same driver, whose
warp writes straight into shared memory; env ``i`` of the vector env is env ``i - lo`` of its block, with
the same seed. A step is one wake-up for all workers (:class:`~retro_atari_kit.processes.Wakeups`): the
actions, the reset mask and the autoreset mode go into shared memory, every worker steps its block and
writes frames, rewards, flags and ALE's counters there, and the last one to finish releases the main
process. The rare rest (a game's true score, an exception) follows over the worker's pipe, as do
``reset``, ``call`` and ``close``. Frame stacking and the autoreset happen in the main process
(:class:`~retro_atari_kit.vector._stacked.StackedVectorEnv`).

A worker that dies makes the call raise :class:`~retro_atari_kit.vector.WorkerDiedError` at once (its
``rank`` is the block's first env), and stops the others.
"""

from __future__ import annotations

import os
import warnings
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.errors import as_int
from retro_atari_kit.processes import (
    ChildDiedError,
    ChildProcess,
    ChildWakeup,
    receive_all,
    reply,
    reply_error,
)
from retro_atari_kit.vector._pool import (
    IN_MEMORY,
    ON_PIPE,
    SharedLayout,
    WakeupWorker,
    WorkerPool,
    WorkerVectorEnv,
    start_worker,
)
from retro_atari_kit.vector._stacked import BatchedInfos, Seeds, StackedVectorEnv
from retro_atari_kit.vector.native_ale import COUNTERS, NativeDriver

MIN_CORES = 8  # below this many cores the default keeps every env in this process


def default_shards(num_envs: int, cores: int | None = None) -> int:
    """On :data:`MIN_CORES` cores or more, one worker process per core with at least two envs each; on
    fewer, 1 (every env in this process).

    Measured (docs/performance.md, "the native backend sharded over processes"): on 16 cores, 1.05x one
    process at N=16 and 1.21x at N=32; on 2 cores, 0.94-1.02x at N=4 and 8, so not worth its processes.
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


class ShardShared(SharedLayout):
    """Numpy views of the one shared-memory segment (the same layout in every process)."""

    def __init__(self, buffer: Any, n: int, shards: int, frame_shape: tuple[int, ...]):
        super().__init__()
        self.frames = self._take(buffer, (n, *frame_shape), np.uint8)
        self.actions = self._take(buffer, (n,), np.int64)
        self.reset_mask = self._take(buffer, (n,), np.bool_)
        self.rewards = self._take(buffer, (n,), np.float64)
        self.flags = self._take(buffer, (n, 2), np.bool_)  # terminated, truncated
        self.counters = self._take(buffer, (n, len(COUNTERS)), np.int64)
        self.where = self._take(buffer, (shards,), np.uint8)


class ShardWorker(WakeupWorker):
    """The worker's side (run by :func:`~retro_atari_kit.processes.serve`): a native driver over envs
    ``[lo, hi)``; steps arrive by a wake-up, everything else over the pipe."""

    def __init__(self, shard: int, lo: int, hi: int, shards: int, game: str, cfg: dict, wakeup: ChildWakeup):
        self.shard, self.lo, self.hi, self.shards = shard, lo, hi, shards
        self.wakeup = wakeup
        # Woken by its semaphore, this thread then does not preempt the main process before it has woken the
        # other workers (a wake-up cost the main process 45 us, 12 us with this; docs/vectorization.md). Set
        # before the emulators start: their C++ threads inherit it.
        if hasattr(os, "SCHED_BATCH"):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        self.driver = NativeDriver(game, hi - lo, cfg)

    def hello(self) -> tuple:
        driver = self.driver
        return driver.frame_space, driver.action_space, driver.metadata

    def _step(self, conn: Connection) -> None:
        shared, lo, hi = self.shared, self.lo, self.hi
        where = IN_MEMORY
        try:
            rewards, terms, truncs, infos = self.driver.step(shared.actions[lo:hi], shared.reset_mask[lo:hi])
            shared.rewards[lo:hi] = rewards
            shared.flags[lo:hi, 0] = terms
            shared.flags[lo:hi, 1] = truncs
            for j, key in enumerate(COUNTERS):
                shared.counters[lo:hi, j] = infos.common[key]
            if infos.extra:
                reply(conn, {lo + i: info for i, info in infos.extra.items()})
                where = ON_PIPE
        except Exception as exc:
            reply_error(conn, exc)
            where = ON_PIPE
        shared.where[self.shard] = where
        self.wakeup.finished()

    def handle(self, command: str, data: Any) -> Any:
        driver = self.driver
        if command == "reset":
            indices, seeds, options = data
            return driver.reset([i - self.lo for i in indices], seeds, options)
        if command == "call":
            return driver.call(*data)
        if command == "set_attr":
            return driver.set_attr(*data)
        if command == "shm":
            name, n = data
            self._attach(name, lambda buffer: ShardShared(buffer, n, self.shards, driver.frame_space.shape))
            driver.frames = self.shared.frames[self.lo : self.hi]  # the warp writes into shared memory
            return None
        raise ValueError(f"unknown worker command {command!r}")

    def close(self) -> None:
        try:
            self.driver.close()
        finally:
            self.driver.frames = None  # its view of the segment
            self._detach()


def _start_shard(
    shard: int,
    block: tuple[int, int],
    shards: int,
    game: str,
    cfg: dict,
    start_method: str,
    wakeup: ChildWakeup,
) -> ChildProcess:
    lo, hi = block
    who = f"envs {lo}-{hi - 1} (RetroKit/{game}-v0): their worker process"
    args = (shard, lo, hi, shards, game, cfg, wakeup)
    return start_worker(ShardWorker, args, who, f"retrokit-shard-{shard}", start_method, rank=lo)


class ShardedNativeDriver(WorkerPool):
    """The native driver's API over ``shards`` worker processes (see the module docstring)."""

    closed_message = "the native vector env is closed"

    def __init__(
        self,
        game: str,
        num_envs: int,
        cfg: dict[str, Any],
        shards: int,
        start_method: str | None = None,
        timeout: float = 60.0,
    ):
        self.num_envs = num_envs
        self.blocks = blocks(num_envs, shards)
        super().__init__(
            shards,
            start_method,
            lambda s, wakeup: _start_shard(s, self.blocks[s], shards, game, cfg, self.start_method, wakeup),
        )
        try:
            self.frame_space, self.action_space, self.metadata = receive_all(self.workers, timeout)[0]
            shape = self.frame_space.shape
            self._share(lambda buffer: ShardShared(buffer, num_envs, shards, shape), num_envs, timeout)
        except BaseException as exc:
            self._started_badly(exc)
            raise

    def _shard_of(self, env: int) -> int:
        return next(s for s, (lo, hi) in enumerate(self.blocks) if lo <= env < hi)

    # -- driver API --------------------------------------------------------------------------------
    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        by_shard: dict[int, tuple[list[int], list[int | None]]] = {}
        for i, seed in zip(indices, seeds, strict=True):
            envs, shard_seeds = by_shard.setdefault(self._shard_of(i), ([], []))
            envs.append(i)
            shard_seeds.append(seed)
        answers = self._request_each([(s, "reset", (*data, options)) for s, data in by_shard.items()])
        infos = {}
        for (envs, _), shard_infos in zip(by_shard.values(), answers, strict=True):
            infos.update(zip(envs, shard_infos, strict=True))
        return [infos[i] for i in indices]

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> tuple:
        self._check()
        shared, workers = self._shared, self.workers
        everyone = range(len(workers))
        try:
            shared.actions[:] = actions
            shared.reset_mask[:] = reset_mask
            self._wakeups.start(everyone)
            self._wakeups.wait(workers)
            answers = receive_all([workers[s] for s in everyone if shared.where[s] == ON_PIPE])
        except ChildDiedError as exc:
            self._died(exc)
            raise
        extra: dict[int, dict] = {}
        for block_extra in answers:
            extra.update(block_extra)
        common = {key: shared.counters[:, j].copy() for j, key in enumerate(COUNTERS)}
        terms, truncs = shared.flags[:, 0].copy(), shared.flags[:, 1].copy()
        return shared.rewards.copy(), terms, truncs, BatchedInfos(common, extra)

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        answers = self._request_each([(s, "call", (name, args, kwargs)) for s in range(len(self.workers))])
        return [value for block in answers for value in block]

    def set_attr(self, name: str, values: list[Any]) -> None:
        self._request_each([(s, "set_attr", (name, values[lo:hi])) for s, (lo, hi) in enumerate(self.blocks)])


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
        try:
            driver = ShardedNativeDriver(game, num_envs, cfg, shards, start_method)
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
