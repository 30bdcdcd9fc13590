"""Shared-memory subprocess backend: one env per worker process, frames and step results in shared memory.

Each worker builds its per-env stack *without* a frame stack, so one ``(C, H, W)`` frame per env and step is
written into a shared-memory array. Frame stacking happens in the main process (:class:`StackedVectorEnv`).
This is the backend for stable-retro (one emulator per process) and the fallback for ALE kwargs the native
backend cannot express.

A step is one wake-up for all workers (:class:`~retro_atari_kit.processes.Bells`): the actions are written
into shared memory, each worker is rung, steps its env and writes its frame, reward, flags and info into
shared memory, and the last one to finish releases the main process. Infos whose values are all ``int``,
``float`` or ``bool`` travel that way (per worker, its keys and types are sent once over the pipe, then only
the values); any other info (e.g. the true score at a game's end), a reset, ``call``, ``set_attr``, an
env's exception and ``close`` travel over the worker's pipe as before. Observations, rewards, flags and infos
are those of the per-env stacks, whichever way they travel.

Robustness comes from the one child-process host (:mod:`retro_atari_kit.processes`): every wait on a worker
also watches its process, so a worker that dies makes the call raise :class:`WorkerDiedError` naming the env
rank at once (no hang); all workers are then shut down. An env's exception reaches the caller as itself.
Workers ignore SIGINT, so Ctrl-C reaches only the main process, which closes them. ``close()`` asks
workers to exit, then terminates/kills stragglers and joins them all (no zombies), and unlinks the shared
memory and semaphores; it is idempotent.
"""

from __future__ import annotations

from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.processes import (
    Bells,
    ChildBell,
    ChildDiedError,
    ChildProcess,
    default_start_method,
    receive_all,
    serve,
    stop_all,
)
from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._stacked import BatchedInfos, Seeds, StackedVectorEnv
from retro_atari_kit.vector._subprocess_worker import ON_PIPE, EnvWorker, Schema, Shared

START_METHODS = ("fork", "forkserver", "spawn")


class WorkerDiedError(ChildDiedError):
    """A worker process of the subprocess backend died; ``rank`` is the env index it ran."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


def _start_worker(rank: int, factory: EnvFactory, start_method: str, bell: ChildBell) -> ChildProcess:
    game = getattr(factory, "game", None)
    return ChildProcess(
        serve,
        (EnvWorker, rank, factory, bell),
        who=f"env rank {rank} (RetroKit/{game}-v0): its worker process"
        if game
        else f"env rank {rank}: its worker process",
        name=f"retrokit-env-{rank}",
        context=start_method,
        advice="the vector env is closed, make a new one",
        died=lambda message: WorkerDiedError(rank, message),
    )


class SubprocessDriver:
    """Runs one env per worker process; steps through shared memory and one wake-up, the rest over pipes."""

    def __init__(self, factories: list[EnvFactory], start_method: str | None = None, timeout: float = 60.0):
        if start_method is None:
            start_method = default_start_method()
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}; got {start_method!r}")
        self.num_envs = n = len(factories)
        self.timeout = timeout
        self.start_method = start_method
        self.closed = False
        self._broken: BaseException | None = None
        self._shm: SharedMemory | None = None
        self._shared: Shared | None = None
        self._schemas: list[Schema | None] = [None] * n  # each worker's info schema, as it sent it
        self._common: list[tuple[str, int, type]] | None = None  # the schema every worker has, if any
        self.workers: list[ChildProcess] = []
        self._bells = Bells(n, start_method)
        try:
            for rank, factory in enumerate(factories):
                self.workers.append(_start_worker(rank, factory, start_method, self._bells.child(rank)))
            spaces = receive_all(self.workers, self.timeout)
            self.frame_space, self.action_space, self.metadata = spaces[0]
            shape = self.frame_space.shape
            self._shm = SharedMemory(create=True, size=Shared(None, n, shape).size)
            self._shared = Shared(self._shm.buf, n, shape)
            for worker in self.workers:
                worker.send("shm", (self._shm.name, n))  # the workers read their pipe until this is done
            receive_all(self.workers, self.timeout)
            self.frames = self._shared.frames
        except BaseException as exc:
            if isinstance(exc, ChildDiedError):
                self._broken = exc
            self.close()
            raise

    def _died(self, exc: ChildDiedError) -> None:
        """A worker died: the others are stopped, and every later call raises the same error."""
        self._broken = exc
        self.close()

    def _check(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self.closed:
            raise RuntimeError("the subprocess vector env is closed")

    def _send_each(self, messages: list[tuple[int, str, Any]]) -> list[ChildProcess]:
        """Send ``(rank, command, data)`` messages, each with its ring; the workers sent to, in order. A
        message whose data cannot be sent (it does not pickle: nothing reaches the pipe, no ring) raises,
        after the answers of the messages already sent have been read, so no answer waits in a pipe for
        a later call to take as its own."""
        sent: list[ChildProcess] = []
        try:
            for rank, command, data in messages:
                self.workers[rank].send(command, data, wake=lambda rank=rank: self._bells.wake(rank))
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

    # -- driver API --------------------------------------------------------------------------------
    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        self._check()
        try:
            messages = [(i, "reset", (seed, options)) for i, seed in zip(indices, seeds, strict=True)]
            return receive_all(self._send_each(messages))
        except ChildDiedError as exc:
            self._died(exc)
            raise

    def step(self, actions: np.ndarray, reset_mask: np.ndarray, same_step: bool):
        self._check()
        shared, workers = self._shared, self.workers
        resets = np.flatnonzero(reset_mask).tolist()
        stepping = [i for i in range(self.num_envs) if not reset_mask[i]] if resets else range(self.num_envs)
        try:
            shared.actions[:] = actions
            shared.same_step[0] = same_step
            self._bells.start(stepping)
            self._send_each([(i, "reset", (None, None)) for i in resets])
            if stepping:
                self._bells.wait(workers)
            on_pipe = [i for i in np.flatnonzero(shared.flags[:, 2] == ON_PIPE).tolist() if i not in resets]
            answers = self._receive(resets + on_pipe)
        except ChildDiedError as exc:
            self._died(exc)
            raise
        rewards = shared.rewards.copy()
        terms = shared.flags[:, 0].astype(bool)
        truncs = shared.flags[:, 1].astype(bool)
        if not answers and self._common is not None:  # the common case: one array per info key
            return rewards, terms, truncs, self._batched(), {}
        return (rewards, terms, truncs, *self._infos(answers, rewards, terms, truncs))

    def _receive(self, ranks: list[int]) -> dict[int, Any]:
        """The answers of ``ranks``; an env's error is raised once every answer is read and every new info
        schema learnt (the worker uses it from now on, whatever this step raises)."""
        answers: dict[int, Any] = {}
        first: Exception | None = None
        for i in ranks:
            try:
                answers[i] = self.workers[i].receive()
            except ChildDiedError:
                raise
            except Exception as exc:
                first = first or exc
        for i, answer in answers.items():
            if isinstance(answer, tuple) and answer[2] is not None:
                self._learn(i, answer[2])
        if first is not None:
            raise first
        return answers

    def _batched(self) -> BatchedInfos:
        shared, common = self._shared, self._common
        width = len(common)
        ints, floats = shared.ints[:, :width].T.copy(), shared.floats[:, :width].T.copy()
        values = {
            key: floats[j] if kind is float else ints[j].astype(bool) if kind is bool else ints[j]
            for key, j, kind in common
        }
        return BatchedInfos(values, {})

    def _infos(self, answers: dict[int, Any], rewards, terms, truncs) -> tuple[list[dict], dict]:
        """Every env's info as its own dict (a reset, an info on the pipe, or a schema not shared by all)."""
        shared = self._shared
        infos: list[dict] = []
        finals: dict[int, tuple[np.ndarray, dict]] = {}
        for i in range(self.num_envs):
            if i not in answers:
                keys, types = self._schemas[i]
                ints, floats = shared.ints[i].tolist(), shared.floats[i].tolist()
                infos.append(
                    {
                        key: floats[j] if kind is float else bool(ints[j]) if kind is bool else ints[j]
                        for j, (key, kind) in enumerate(zip(keys, types, strict=True))
                    }
                )
                continue
            answer = answers[i]
            if isinstance(answer, dict):  # an autoreset: reward 0, no flags, the reset's info
                rewards[i], terms[i], truncs[i] = 0.0, False, False
                infos.append(answer)
                continue
            info, final_info, _ = answer
            if final_info is not None:
                finals[i] = (shared.final_frames[i].copy(), final_info)
            infos.append(info)
        return infos, finals

    def _learn(self, rank: int, schema: Schema) -> None:
        """Worker ``rank`` now writes infos of ``schema`` into shared memory."""
        self._schemas[rank] = schema
        first = self._schemas[0]
        if first is not None and all(s == first for s in self._schemas):
            self._common = [(key, j, kind) for j, (key, kind) in enumerate(zip(*first, strict=True))]
        else:
            self._common = None

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        self._check()
        try:
            messages = [(i, "call", (name, args, kwargs)) for i in range(self.num_envs)]
            return receive_all(self._send_each(messages))
        except ChildDiedError as exc:
            self._died(exc)
            raise

    def set_attr(self, name: str, values: list[Any]) -> None:
        self._check()
        try:
            messages = [(i, "set_attr", (name, value)) for i, value in enumerate(values)]
            receive_all(self._send_each(messages))  # e.g. a value that does not pickle: no stale answer
        except ChildDiedError as exc:
            self._died(exc)
            raise

    def close(self) -> None:
        """Ask workers to exit, terminate/kill any that do not within a second, join all; unlink the shared
        memory and the semaphores. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for rank in range(len(self.workers)):
            self._bells.wake(rank)  # to read the close stop_all writes (a worker may be on its bell)
        stop_all(self.workers)  # bounded even here: close() must never hang
        self._bells.close()
        if self._shm is not None:
            self.frames = self._shared = None  # type: ignore[assignment]
            try:
                self._shm.close()
                self._shm.unlink()
            except (BufferError, FileNotFoundError):
                pass
            self._shm = None

    @property
    def pids(self) -> list[int | None]:
        return [worker.pid for worker in self.workers]


class SubprocessVectorEnv(StackedVectorEnv):
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
        """Process ids of the workers, by env rank."""
        return self.driver.pids  # type: ignore[attr-defined]


def make_subprocess_vector_env(
    factories: list[EnvFactory],
    frame_stack: int,
    autoreset_mode: AutoresetMode | str,
    start_method: str | None = None,
) -> SubprocessVectorEnv:
    """Build the shared-memory subprocess backend (see the module docstring)."""
    driver = SubprocessDriver(factories, start_method)
    return SubprocessVectorEnv(driver, frame_stack, autoreset_mode, "subprocess")
