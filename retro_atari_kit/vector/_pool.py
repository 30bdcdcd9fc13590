"""The process backends' workers: each worker process hosts a driver over a block of envs, and one pool
drives them all as one driver.

A worker (:class:`DriverWorker`) runs a :class:`~retro_atari_kit.vector._stacked.Driver` over envs
``[lo, hi)``: an :class:`~retro_atari_kit.vector.inprocess.InProcessDriver` over one env (the subprocess
backend: stable-retro allows one emulator per process) or a
:class:`~retro_atari_kit.vector.native_ale.NativeDriver` over a block (the native backend's shards). The
driver's ``frames`` lie in one shared-memory segment, so each frame is written where the main process reads
it.

A step (:class:`WorkerDriver`, the main side) is one wake-up for all workers
(:class:`~retro_atari_kit.processes.Wakeups`): the actions and the reset mask (the envs that autoreset now)
go into shared memory, each worker calls its driver's ``step`` on its slice and writes rewards, flags and
the infos every env of its block has (``BatchedInfos.common``) there, laid out by a schema (keys and dtypes)
the main process learns when it changes; the last one to finish releases the main process. The rest (a
game's true score, a new schema, an env's exception) follows over the worker's pipe, as do ``reset``,
``call``, ``set_attr`` and ``close``.

Every wait on a worker also watches its process: a worker that dies makes the call raise
:class:`WorkerDiedError` at once (``rank``: its block's first env) and stops the others, and every later call
raises the same error. An env's exception reaches the caller as itself once every worker's answer is read.
Workers ignore SIGINT, so Ctrl-C reaches only the main process, which closes them (:class:`WorkerVectorEnv`).
``close()`` asks workers to exit, terminates/kills stragglers and joins them all (no zombies), and unlinks the
shared memory and the semaphores; it is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any, NamedTuple

import numpy as np

from retro_atari_kit.limits import check_shared_memory
from retro_atari_kit.processes import (
    ChildDiedError,
    ChildProcess,
    ChildWakeup,
    Wakeups,
    default_start_method,
    receive_all,
    reply,
    reply_error,
    serve,
    stop_all,
)
from retro_atari_kit.vector._stacked import BatchedInfos, Driver, Seeds, StackedVectorEnv

START_METHODS = ("fork", "forkserver", "spawn")
IN_MEMORY, ON_PIPE = 0, 1  # where a worker's step result is: all in shared memory, or (also) on the pipe
MAX_INFO_KEYS = 64  # a block whose infos have more common keys sends them all over the pipe
INFO_DTYPES = (np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_))  # what an int64 slot holds

# a block's common info keys and their dtypes, in the order of its shared-memory rows; None: every info of the
# block travels over the pipe
Schema = tuple[tuple[str, np.dtype], ...] | None


class WorkerDiedError(ChildDiedError):
    """A worker process of a vector env died; ``rank`` is the (first) env index it ran."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


WorkerDiedError.__module__ = "retro_atari_kit.vector"  # its public name, as tracebacks print it


class Block(NamedTuple):
    """One worker's envs ``[lo, hi)``, what builds its driver there (picklable), and how errors name it."""

    lo: int
    hi: int
    driver: Callable[[], Driver]
    who: str


class Shared:
    """Numpy views of the one shared-memory segment, laid out the same way in the main process and in every
    worker (``buffer=None``: sizing only, the views are empty). ``size`` is the segment's size in bytes."""

    def __init__(self, buffer: Any, n: int, workers: int, frame_shape: tuple[int, ...]):
        self.size = 0
        self.frames = self._take(buffer, (n, *frame_shape), np.uint8)
        self.actions = self._take(buffer, (n,), np.int64)
        self.reset_mask = self._take(buffer, (n,), np.bool_)
        self.rewards = self._take(buffer, (n,), np.float64)
        self.flags = self._take(buffer, (n, 2), np.bool_)  # terminated, truncated
        # env i's row: its block's common info values in schema order (floats as their bits); env-major, so
        # that workers on other cores do not write into the same cache lines
        self.infos = self._take(buffer, (n, MAX_INFO_KEYS), np.int64)
        self.where = self._take(buffer, (workers,), np.uint8)  # IN_MEMORY or ON_PIPE, per worker

    def _take(self, buffer: Any, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        offset = -(-self.size // 64) * 64  # each array on its own cache lines
        self.size = offset + int(np.prod(shape)) * np.dtype(dtype).itemsize
        if buffer is None:
            return np.empty((0, *shape[1:]), dtype=dtype)
        return np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)


def schema_of(common: dict[str, np.ndarray]) -> Schema:
    """The schema of a block's common infos, None if they do not fit the shared-memory rows."""
    schema = tuple((key, values.dtype) for key, values in common.items())
    if len(schema) > MAX_INFO_KEYS or any(dtype not in INFO_DTYPES for _, dtype in schema):
        return None  # e.g. ints beyond int64, which numpy keeps as objects
    return schema


def read_infos(rows: np.ndarray, schema: Schema) -> dict[str, np.ndarray]:
    """The common infos written into ``rows`` (the shared info rows of some envs) by ``schema``, copied."""
    return {
        key: (rows[:, j].view(dtype) if dtype.kind == "f" else rows[:, j]).astype(dtype)
        for j, (key, dtype) in enumerate(schema or ())
    }


class DriverWorker:
    """A worker's side (run by :func:`~retro_atari_kit.processes.serve`): the driver of block ``index``.
    Until the shared memory is attached, commands arrive over the pipe only; then steps arrive by the
    wake-up and everything else over the pipe."""

    def __init__(self, index: int, block: Block, wakeup: ChildWakeup):
        self.index, self.lo, self.hi, self.wakeup = index, block.lo, block.hi, wakeup
        self.driver = block.driver()  # construction errors (bad kwargs, missing ROM) reach the caller as such
        self.schema: Schema = ()  # what the main process knows of this block's infos
        self.shm: SharedMemory | None = None
        self.shared: Shared | None = None

    def hello(self) -> tuple:
        return self.driver.frame_space, self.driver.action_space, self.driver.metadata

    def next_command(self, conn: Connection) -> tuple:
        if self.shared is None:
            return conn.recv()
        while True:
            message = self.wakeup.wait(conn)
            if message is not None:
                return message
            self.step(conn)

    def step(self, conn: Connection) -> None:
        """One step for a wake-up: results into shared memory, what does not fit there on the pipe, then
        ``wakeup.finished()``."""
        shared, lo, hi = self.shared, self.lo, self.hi
        where = IN_MEMORY
        try:
            rewards, terms, truncs, infos = self.driver.step(shared.actions[lo:hi], shared.reset_mask[lo:hi])
            shared.rewards[lo:hi] = rewards
            shared.flags[lo:hi, 0] = terms
            shared.flags[lo:hi, 1] = truncs
            schema, extra = schema_of(infos.common), infos.extra
            if schema is None:  # every env's whole info over the pipe
                extra = {i: infos.env(i) for i in range(hi - lo)}
            else:
                rows = shared.infos[lo:hi]
                for j, values in enumerate(infos.common.values()):
                    rows[:, j] = values.view(np.int64) if values.dtype.kind == "f" else values
            if extra or schema != self.schema:
                reply(conn, (schema, {lo + i: info for i, info in extra.items()}))  # may not pickle: raises
                self.schema = schema
                where = ON_PIPE
        except Exception as exc:
            reply_error(conn, exc)
            where = ON_PIPE
        shared.where[self.index] = where
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
            name, layout = data
            self.shm = attach_untracked(name)
            self.shared = Shared(self.shm.buf, *layout)
            driver.frames = self.shared.frames[self.lo : self.hi]  # the driver writes into shared memory
            return None
        raise ValueError(f"unknown worker command {command!r}")

    def close(self) -> None:
        try:
            self.driver.close()
        finally:
            self.driver.frames = self.shared = None  # release the views of the segment before closing it
            if self.shm is not None:  # the main process unlinks it
                self.shm.close()


class WorkerDriver:
    """The :class:`~retro_atari_kit.vector._stacked.Driver` API over one worker process per block (see the
    module docstring); ``name`` prefixes the processes' names, ``backend`` names the vector env in errors."""

    def __init__(
        self,
        blocks: list[Block],
        backend: str,
        name: str,
        start_method: str | None = None,
        timeout: float = 60.0,
    ):
        if start_method is None:
            start_method = default_start_method()
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}; got {start_method!r}")
        self.blocks, self.backend, self.start_method = blocks, backend, start_method
        self.num_envs = n = blocks[-1].hi
        self._worker_of = [w for w, block in enumerate(blocks) for _ in range(block.lo, block.hi)]
        self._schemas: list[Schema] = [()] * len(blocks)  # each block's info schema, as it sent it
        self._common: Schema = ()  # the schema every block has; None if they differ
        self.closed = False
        self._broken: BaseException | None = None
        self._shm: SharedMemory | None = None
        self._shared: Shared | None = None
        self.workers: list[ChildProcess] = []
        self._wakeups = Wakeups(len(blocks), start_method)
        try:
            for w, block in enumerate(blocks):
                child = ChildProcess(
                    serve,
                    (DriverWorker, w, block, self._wakeups.child(w)),
                    who=block.who,
                    name=f"{name}-{w}",
                    context=start_method,
                    advice="the vector env is closed, make a new one",
                    died=lambda message, rank=block.lo: WorkerDiedError(rank, message),
                )
                self.workers.append(child)
            self.frame_space, self.action_space, self.metadata = receive_all(self.workers, timeout)[0]
            layout = (n, len(blocks), self.frame_space.shape)
            size = Shared(None, *layout).size
            check_shared_memory(f"{n} envs' frames", size)  # a full /dev/shm is SIGBUS, not an error
            self._shm = SharedMemory(create=True, size=size)
            self._shared = Shared(self._shm.buf, *layout)
            for worker in self.workers:  # they read their pipe until this is done
                worker.send("shm", (self._shm.name, layout))
            receive_all(self.workers, timeout)
            self.frames = self._shared.frames
        except BaseException as exc:
            if isinstance(exc, ChildDiedError):
                self._broken = exc
            self.close()
            raise

    # -- driver API --------------------------------------------------------------------------------
    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        by_worker: dict[int, tuple[list[int], Seeds]] = {}
        for i, seed in zip(indices, seeds, strict=True):
            envs, block_seeds = by_worker.setdefault(self._worker_of[i], ([], []))
            envs.append(i)
            block_seeds.append(seed)
        answers = self._request_each([(w, "reset", (*data, options)) for w, data in by_worker.items()])
        infos = {}
        for (envs, _), block_infos in zip(by_worker.values(), answers, strict=True):
            infos.update(zip(envs, block_infos, strict=True))
        return [infos[i] for i in indices]

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> tuple:
        self._check()
        shared, workers = self._shared, self.workers
        extra: dict[int, dict] = {}
        first: Exception | None = None  # an env's error, raised once every answer is read
        try:
            shared.actions[:] = actions
            shared.reset_mask[:] = reset_mask
            self._wakeups.start(range(len(workers)))
            self._wakeups.wait(workers)
            on_pipe = np.flatnonzero(shared.where).tolist() if shared.where.any() else ()  # ON_PIPE is 1
            for w in on_pipe:
                try:
                    self._schemas[w], block_extra = workers[w].receive()
                    extra.update(block_extra)
                except ChildDiedError:
                    raise
                except Exception as exc:
                    first = first or exc
        except ChildDiedError as exc:
            self._died(exc)
            raise
        if on_pipe:  # a schema learnt is the worker's from now on, whatever this step raises
            schema = self._schemas[0]
            self._common = schema if all(s == schema for s in self._schemas) else None
        if first is not None:
            raise first
        terms, truncs = shared.flags[:, 0].copy(), shared.flags[:, 1].copy()
        return shared.rewards.copy(), terms, truncs, self._infos(extra)

    def _infos(self, extra: dict[int, dict]) -> BatchedInfos:
        """The step's infos: one array per key straight from shared memory when every block has one schema,
        else every env's info as a dict, batched as an in-process driver's are."""
        if self._common is not None:
            return BatchedInfos(read_infos(self._shared.infos, self._common), extra)
        infos: list[dict] = []
        for block, schema in zip(self.blocks, self._schemas, strict=True):
            common = BatchedInfos(read_infos(self._shared.infos[block.lo : block.hi], schema), {})
            infos += [{**common.env(i - block.lo), **extra.get(i, {})} for i in range(block.lo, block.hi)]
        return BatchedInfos.of(infos)

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        answers = self._request_each([(w, "call", (name, args, kwargs)) for w in range(len(self.workers))])
        return [value for block in answers for value in block]

    def set_attr(self, name: str, values: list[Any]) -> None:
        # e.g. a value that does not pickle: no stale answer is left in a pipe
        self._request_each([(w, "set_attr", (name, values[b.lo : b.hi])) for w, b in enumerate(self.blocks)])

    # -- the pipes and breaking down ---------------------------------------------------------------
    def _died(self, exc: ChildDiedError) -> None:
        """A worker died: the others are stopped, and every later call raises the same error."""
        self._broken = exc
        self.close()

    def _check(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self.closed:
            raise RuntimeError(f"the {self.backend} vector env is closed")

    def _send_each(self, messages: list[tuple[int, str, Any]]) -> list[ChildProcess]:
        """Send ``(worker, command, data)`` messages, each with its wake-up; the workers sent to, in order. A
        message whose data cannot be sent (it does not pickle: nothing reaches the pipe, no wake-up) raises,
        after the answers of the messages already sent have been read, so no answer waits in a pipe for
        a later call to take as its own."""
        sent: list[ChildProcess] = []
        try:
            for w, command, data in messages:
                self.workers[w].send(command, data, wake=lambda w=w: self._wakeups.wake(w))
                sent.append(self.workers[w])
        except ChildDiedError:
            raise
        except Exception:
            try:
                receive_all(sent)
            except ChildDiedError:
                raise
            except Exception:  # noqa: BLE001 - their errors are not this call's; the send's error is
                pass
            raise
        return sent

    def _request_each(self, messages: list[tuple[int, str, Any]]) -> list[Any]:
        """:meth:`_send_each`, then every answer in order; a dead worker breaks the pool."""
        self._check()
        try:
            return receive_all(self._send_each(messages))
        except ChildDiedError as exc:
            self._died(exc)
            raise

    def close(self) -> None:
        """Ask workers to exit, terminate/kill any that do not within a second, join all; unlink the shared
        memory and the semaphores. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for w in range(len(self.workers)):
            self._wakeups.wake(w)  # to read the close stop_all writes (a worker may be on its semaphore)
        stop_all(self.workers)  # bounded even here: close() must never hang
        self._wakeups.close()
        if self._shm is not None:
            self.frames = self._shared = None  # release the views of the segment before closing it
            try:
                self._shm.close()
                self._shm.unlink()
            except (BufferError, FileNotFoundError):
                pass
            self._shm = None

    @property
    def pids(self) -> list[int | None]:
        return [worker.pid for worker in self.workers]


class WorkerVectorEnv(StackedVectorEnv):
    """:class:`StackedVectorEnv` over worker processes; Ctrl-C during a call closes the workers."""

    def step(self, actions):
        try:
            return super().step(actions)
        except KeyboardInterrupt:
            self.close()
            raise

    def reset(self, **kwargs: Any):
        try:
            return super().reset(**kwargs)
        except KeyboardInterrupt:
            self.close()
            raise

    @property
    def worker_pids(self) -> list[int | None]:
        """Process ids of the workers: one per env (subprocess backend) or per block of envs (sharded)."""
        return self.driver.pids  # type: ignore[attr-defined]


def attach_untracked(name: str) -> SharedMemory:
    """Attach to the main process's segment without registering it with a resource tracker.

    Python < 3.13 registers every attached segment; the main process owns and unlinks it, so a worker's
    registration only produces false "leaked shared_memory" warnings (spawn) or a double unlink.
    """
    from multiprocessing import resource_tracker

    register = resource_tracker.register
    resource_tracker.register = lambda *args, **kwargs: None  # this worker process only
    try:
        return SharedMemory(name=name)
    finally:
        resource_tracker.register = register
