"""Shared-memory subprocess backend: one env per worker process, frames and step results in shared memory.

Each worker builds its per-env stack *without* a frame stack, so one ``(C, H, W)`` frame per env and step is
written into a shared-memory array. Frame stacking happens in the main process (:class:`StackedVectorEnv`).
This is the backend for stable-retro (one emulator per process) and the fallback for ALE kwargs the native
backend cannot express.

A step is one wake-up for all workers (:class:`~retro_atari_kit.processes.Wakeups`): the actions are written
into shared memory, each worker (:class:`EnvWorker`, its side) is woken, steps its env and writes its frame,
reward, flags and info into shared memory, and the last one to finish releases the main process. Infos
whose values are all ``int``, ``float`` or ``bool`` travel that way (per worker, its keys and types are sent
once over the pipe, then only the values); any other info (e.g. the true score at a game's end), a reset,
``call``, ``set_attr``, an env's exception and ``close`` travel over the worker's pipe. Observations,
rewards, flags and infos are those of the per-env stacks, whichever way they travel.

Robustness comes from the one child-process host (:mod:`retro_atari_kit.processes`): every wait on a worker
also watches its process, so a worker that dies makes the call raise :class:`WorkerDiedError` naming the env
rank at once (no hang); all workers are then shut down. An env's exception reaches the caller as itself.
Workers ignore SIGINT, so Ctrl-C reaches only the main process, which closes them. ``close()`` asks
workers to exit, then terminates/kills stragglers and joins them all (no zombies), and unlinks the shared
memory and semaphores; it is idempotent.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.processes import (
    ChildDiedError,
    ChildProcess,
    ChildWakeup,
    receive_all,
    reply,
    reply_error,
)
from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._pool import (
    IN_MEMORY,
    ON_PIPE,
    START_METHODS,
    SharedLayout,
    WakeupWorker,
    WorkerDiedError,
    WorkerPool,
    WorkerVectorEnv,
    start_worker,
)
from retro_atari_kit.vector._stacked import BatchedInfos, Seeds

__all__ = ["START_METHODS", "SubprocessDriver", "WorkerDiedError"]

# -- the worker side: one env, its slots in shared memory, and its semaphore -------------------------------
MAX_INFO_KEYS = 64  # an info with more keys travels over the pipe
_INFO_TYPES = (int, float, bool)  # the types StackedVectorEnv batches into one array per key

Schema = tuple[tuple[str, ...], tuple[type, ...]]  # an info's keys in order, and each value's type


class Shared(SharedLayout):
    """Numpy views of the one shared-memory segment: each env's latest frame and the step block."""

    def __init__(self, buffer: Any, n: int, frame_shape: tuple[int, ...]):
        super().__init__()
        self.frames = self._take(buffer, (n, *frame_shape), np.uint8)
        self.actions = self._take(buffer, (n,), np.int64)
        self.rewards = self._take(buffer, (n,), np.float64)
        self.flags = self._take(buffer, (n, 3), np.uint8)  # terminated, truncated, where the result is
        self.ints = self._take(buffer, (n, MAX_INFO_KEYS), np.int64)  # int and bool values
        self.floats = self._take(buffer, (n, MAX_INFO_KEYS), np.float64)


def info_schema(info: dict) -> Schema | None:
    """The schema of an info that can travel in shared memory, else None."""
    if len(info) > MAX_INFO_KEYS:
        return None
    types = tuple(type(value) for value in info.values())
    if not all(t in _INFO_TYPES for t in types):
        return None
    return tuple(info), types


class EnvWorker(WakeupWorker):
    """The worker's side (run by :func:`~retro_atari_kit.processes.serve`): one env, its shared-memory
    slots, and its semaphore; steps arrive by a wake-up, everything else over the pipe."""

    def __init__(self, rank: int, factory: EnvFactory, wakeup: ChildWakeup):
        self.rank = rank
        self.wakeup = wakeup
        self.env = factory()  # construction errors (bad kwargs, missing ROM) reach the caller as themselves
        self.schema: Schema | None = None  # what the main process knows of this worker's infos

    def hello(self) -> tuple:
        meta = dict(self.env.metadata)
        meta["render_mode"] = self.env.render_mode
        return self.env.observation_space, self.env.action_space, meta

    def _step(self, conn: Connection) -> None:
        """One env step for a wake-up; the result in shared memory, what does not fit there on the pipe."""
        shared, rank = self.shared, self.rank
        where = IN_MEMORY
        try:
            obs, reward, terminated, truncated, info = self.env.step(shared.actions[rank])
            shared.frames[rank] = obs
            shared.rewards[rank] = float(reward)
            shared.flags[rank, 0] = bool(terminated)
            shared.flags[rank, 1] = bool(truncated)
            if not self._write_info(info):
                schema = info_schema(info)
                reply(conn, (info, schema))  # an unpicklable info raises here, as before
                if schema is not None:
                    self.schema = schema
                where = ON_PIPE
        except Exception as exc:
            reply_error(conn, exc)
            where = ON_PIPE
        shared.flags[rank, 2] = where
        self.wakeup.finished()

    def _write_info(self, info: dict) -> bool:
        """Write ``info``'s values into shared memory if it has this worker's schema."""
        schema = self.schema
        if schema is None or len(info) != len(schema[0]) or tuple(info) != schema[0]:
            return False
        ints, floats = self.shared.ints[self.rank], self.shared.floats[self.rank]
        try:
            for j, (value, kind) in enumerate(zip(info.values(), schema[1], strict=True)):
                if type(value) is not kind:
                    return False
                if kind is float:
                    floats[j] = value
                else:
                    ints[j] = value
        except OverflowError:  # an int beyond int64
            return False
        return True

    def handle(self, command: str, data: Any) -> Any:
        env = self.env
        if command == "reset":
            seed, options = data
            obs, info = env.reset(seed=seed, options=options)
            self.shared.frames[self.rank] = obs
            return info
        if command == "call":
            name, args, kwargs = data
            attr = getattr(env, name)
            return attr(*args, **kwargs) if callable(attr) else attr
        if command == "set_attr":
            name, value = data
            setattr(env, name, value)
            return None
        if command == "shm":
            name, n = data
            self._attach(name, lambda buffer: Shared(buffer, n, env.observation_space.shape))
            return None
        raise ValueError(f"unknown worker command {command!r}")

    def close(self) -> None:
        try:
            self.env.close()
        finally:
            self._detach()


# -- the main-process side ---------------------------------------------------------------------------------


def _start_worker(rank: int, factory: EnvFactory, start_method: str, wakeup: ChildWakeup) -> ChildProcess:
    game = getattr(factory, "game", None)
    who = (
        f"env rank {rank} (RetroKit/{game}-v0): its worker process"
        if game
        else f"env rank {rank}: its worker process"
    )
    return start_worker(EnvWorker, (rank, factory, wakeup), who, f"retrokit-env-{rank}", start_method, rank)


class SubprocessDriver(WorkerPool):
    """Runs one env per worker process; steps through shared memory and one wake-up, the rest over pipes."""

    closed_message = "the subprocess vector env is closed"

    def __init__(self, factories: list[EnvFactory], start_method: str | None = None, timeout: float = 60.0):
        self.num_envs = n = len(factories)
        self.timeout = timeout
        self._schemas: list[Schema | None] = [None] * n  # each worker's info schema, as it sent it
        self._common: list[tuple[str, int, type]] | None = None  # the schema every worker has, if any
        super().__init__(
            n,
            start_method,
            lambda rank, wakeup: _start_worker(rank, factories[rank], self.start_method, wakeup),
        )
        try:
            spaces = receive_all(self.workers, self.timeout)
            self.frame_space, self.action_space, self.metadata = spaces[0]
            self._share(lambda buffer: Shared(buffer, n, self.frame_space.shape), n, self.timeout)
        except BaseException as exc:
            self._started_badly(exc)
            raise

    # -- driver API --------------------------------------------------------------------------------
    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        messages = [(i, "reset", (seed, options)) for i, seed in zip(indices, seeds, strict=True)]
        return self._request_each(messages)

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> tuple:
        self._check()
        shared, workers = self._shared, self.workers
        resets = np.flatnonzero(reset_mask).tolist()
        stepping = [i for i in range(self.num_envs) if not reset_mask[i]] if resets else range(self.num_envs)
        try:
            shared.actions[:] = actions
            self._wakeups.start(stepping)
            self._send_each([(i, "reset", (None, None)) for i in resets])
            if stepping:
                self._wakeups.wait(workers)
            on_pipe = [i for i in np.flatnonzero(shared.flags[:, 2] == ON_PIPE).tolist() if i not in resets]
            answers = self._receive(resets + on_pipe)
        except ChildDiedError as exc:
            self._died(exc)
            raise
        rewards = shared.rewards.copy()
        terms = shared.flags[:, 0].astype(bool)
        truncs = shared.flags[:, 1].astype(bool)
        if not answers and self._common is not None:  # the common case: one array per info key
            return rewards, terms, truncs, self._batched()
        return rewards, terms, truncs, BatchedInfos.of(self._infos(answers, rewards, terms, truncs))

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
            if isinstance(answer, tuple) and answer[1] is not None:
                self._learn(i, answer[1])
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

    def _infos(self, answers: dict[int, Any], rewards, terms, truncs) -> list[dict]:
        """Every env's info as its own dict (a reset, an info on the pipe, or a schema not shared by all)."""
        shared = self._shared
        infos: list[dict] = []
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
            elif isinstance(answers[i], dict):  # an autoreset: reward 0, no flags, the reset's info
                rewards[i], terms[i], truncs[i] = 0.0, False, False
                infos.append(answers[i])
            else:
                infos.append(answers[i][0])
        return infos

    def _learn(self, rank: int, schema: Schema) -> None:
        """Worker ``rank`` now writes infos of ``schema`` into shared memory."""
        self._schemas[rank] = schema
        first = self._schemas[0]
        if first is not None and all(s == first for s in self._schemas):
            self._common = [(key, j, kind) for j, (key, kind) in enumerate(zip(*first, strict=True))]
        else:
            self._common = None

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        return self._request_each([(i, "call", (name, args, kwargs)) for i in range(self.num_envs)])

    def set_attr(self, name: str, values: list[Any]) -> None:
        # e.g. a value that does not pickle: no stale answer is left in a pipe
        self._request_each([(i, "set_attr", (name, value)) for i, value in enumerate(values)])


def make_subprocess_vector_env(
    factories: list[EnvFactory],
    frame_stack: int,
    autoreset_mode: AutoresetMode | str,
    start_method: str | None = None,
) -> WorkerVectorEnv:
    """Build the shared-memory subprocess backend (see the module docstring)."""
    driver = SubprocessDriver(factories, start_method)
    return WorkerVectorEnv(driver, frame_stack, autoreset_mode, "subprocess")
