"""What the process backends share: worker processes woken by :class:`~retro_atari_kit.processes.Wakeups`, one
shared-memory segment, the pipe for everything else, and one way to break down (a worker that dies stops
the others, and every later call raises the same error)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from retro_atari_kit.limits import check_shared_memory
from retro_atari_kit.processes import (
    ChildDiedError,
    ChildProcess,
    ChildWakeup,
    Wakeups,
    default_start_method,
    receive_all,
    serve,
    stop_all,
)
from retro_atari_kit.vector._stacked import StackedVectorEnv

START_METHODS = ("fork", "forkserver", "spawn")
IN_MEMORY, ON_PIPE = 0, 1  # where a worker's step result is: all in shared memory, or (also) on the pipe


class WorkerDiedError(ChildDiedError):
    """A worker process of a vector env died; ``rank`` is the (first) env index it ran."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


WorkerDiedError.__module__ = "retro_atari_kit.vector"  # its public name, as tracebacks print it


def start_worker(
    handler: type, args: tuple, who: str, name: str, start_method: str, rank: int
) -> ChildProcess:
    """Start a worker process serving ``handler(*args)`` (:func:`~retro_atari_kit.processes.serve`); its
    death raises :class:`WorkerDiedError` with ``rank``, and ``who`` names it in errors."""
    return ChildProcess(
        serve,
        (handler, *args),
        who=who,
        name=name,
        context=start_method,
        advice="the vector env is closed, make a new one",
        died=lambda message: WorkerDiedError(rank, message),
    )


class WakeupWorker(ABC):
    """The worker side's loop: the pipe alone until the shared memory is attached (:meth:`_attach`, the twin
    of :meth:`WorkerPool._share`), then steps by the ``wakeup`` (:meth:`_step`) and every other command over
    the pipe."""

    wakeup: ChildWakeup
    shm: SharedMemory | None = None
    shared: Any = None  # the subclass's layout of the segment, once attached

    def next_command(self, conn: Connection) -> tuple:
        if self.shared is None:  # before the shared memory is attached, only the pipe
            return conn.recv()
        while True:
            message = self.wakeup.wait(conn)
            if message is not None:
                return message
            self._step(conn)

    @abstractmethod
    def _step(self, conn: Connection) -> None:
        """One step for a wake-up: results into shared memory, what does not fit there on the pipe, then
        ``wakeup.finished()``."""

    def _attach(self, name: str, layout: Callable[[Any], Any]) -> None:
        """Attach to the main process's segment ``name`` (untracked) and lay it out (``layout(buffer)``)."""
        self.shm = attach_untracked(name)
        self.shared = layout(self.shm.buf)

    def _detach(self) -> None:
        """Drop the layout and close the segment (the main process unlinks it); a subclass drops its own views
        of the segment first."""
        if self.shm is not None:
            self.shared = None  # release the buffer views before closing the segment
            self.shm.close()
            self.shm = None


class SharedLayout:
    """Numpy views of one shared-memory segment, laid out the same way in the main process and in every
    worker: subclasses take their arrays in order with :meth:`_take` (``buffer=None``: sizing only, the
    views are empty). ``size`` is the segment's size in bytes."""

    def __init__(self) -> None:
        self.size = 0

    def _take(self, buffer: Any, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        offset = -(-self.size // 64) * 64  # each array on its own cache lines
        self.size = offset + int(np.prod(shape)) * np.dtype(dtype).itemsize
        if buffer is None:
            return np.empty((0, *shape[1:]), dtype=dtype)
        return np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)


class WorkerPool:
    """Worker processes of one vector env, each started with its wake-up semaphore; subclasses add the shared
    memory and the driver API. ``start(rank, wakeup)`` starts worker ``rank``; a failure while starting closes
    them all."""

    closed_message = "the vector env is closed"

    def __init__(
        self, workers: int, start_method: str | None, start: Callable[[int, ChildWakeup], ChildProcess]
    ):
        if start_method is None:
            start_method = default_start_method()
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}; got {start_method!r}")
        self.start_method = start_method
        self.closed = False
        self._broken: BaseException | None = None
        self._shm: SharedMemory | None = None
        self._shared: Any = None  # the subclass's layout of the segment, once shared
        self.workers: list[ChildProcess] = []
        self._wakeups = Wakeups(workers, start_method)
        try:
            for rank in range(workers):
                self.workers.append(start(rank, self._wakeups.child(rank)))
        except BaseException as exc:
            self._started_badly(exc)
            raise

    def _started_badly(self, exc: BaseException) -> None:
        """Call from a subclass's ``__init__`` when it fails after the workers started."""
        if isinstance(exc, ChildDiedError):
            self._broken = exc
        self.close()

    def _share(self, layout: Callable[[Any], Any], num_envs: int, timeout: float) -> None:
        """Create the shared-memory segment ``layout`` lays out (called with None to size it, then with the
        buffer), send every worker its name and wait until all have attached; ``frames`` is its frame view."""
        size = layout(None).size
        check_shared_memory(f"{num_envs} envs' frames", size)  # a full /dev/shm is SIGBUS, not an error
        self._shm = shm = SharedMemory(create=True, size=size)
        self._shared = layout(shm.buf)
        for worker in self.workers:
            worker.send("shm", (shm.name, num_envs))  # the workers read their pipe until this is done
        receive_all(self.workers, timeout)
        self.frames = self._shared.frames

    def _died(self, exc: ChildDiedError) -> None:
        """A worker died: the others are stopped, and every later call raises the same error."""
        self._broken = exc
        self.close()

    def _check(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self.closed:
            raise RuntimeError(self.closed_message)

    def _send_each(self, messages: list[tuple[int, str, Any]]) -> list[ChildProcess]:
        """Send ``(rank, command, data)`` messages, each with its wake-up; the workers sent to, in order. A
        message whose data cannot be sent (it does not pickle: nothing reaches the pipe, no wake-up) raises,
        after the answers of the messages already sent have been read, so no answer waits in a pipe for
        a later call to take as its own."""
        sent: list[ChildProcess] = []
        try:
            for rank, command, data in messages:
                self.workers[rank].send(command, data, wake=lambda rank=rank: self._wakeups.wake(rank))
                sent.append(self.workers[rank])
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

    def _release_views(self) -> None:
        """Drop every numpy view of the shared memory, so that it can be closed."""
        self.frames = self._shared = None

    def close(self) -> None:
        """Ask workers to exit, terminate/kill any that do not within a second, join all; unlink the shared
        memory and the semaphores. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for rank in range(len(self.workers)):
            self._wakeups.wake(rank)  # to read the close stop_all writes (a worker may be on its semaphore)
        stop_all(self.workers)  # bounded even here: close() must never hang
        self._wakeups.close()
        if self._shm is not None:
            self._release_views()
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
