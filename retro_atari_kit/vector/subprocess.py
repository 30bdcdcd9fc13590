"""Shared-memory subprocess backend: one env per worker process, frames and step results in shared memory.

Each worker builds its per-env stack *without* a frame stack, so one ``(C, H, W)`` frame per env and step is
written into a shared-memory array. Frame stacking happens in the main process (:class:`StackedVectorEnv`).
This is the backend for stable-retro (one emulator per process) and the fallback for ALE kwargs the native
backend cannot express.

A step is one wake-up for all workers (:class:`~retro_atari_kit.processes.Wakeups`): the actions are written
into shared memory, each worker is woken, steps its env and writes its frame, reward, flags and info into
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

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.processes import ChildDiedError, ChildProcess, ChildWakeup, receive_all
from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._pool import (
    ON_PIPE,
    START_METHODS,
    WorkerDiedError,
    WorkerPool,
    WorkerVectorEnv,
    start_worker,
)
from retro_atari_kit.vector._stacked import BatchedInfos, Seeds
from retro_atari_kit.vector._subprocess_worker import EnvWorker, Schema, Shared

__all__ = ["START_METHODS", "SubprocessDriver", "WorkerDiedError"]


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

    def step(self, actions: np.ndarray, reset_mask: np.ndarray, same_step: bool):
        self._check()
        shared, workers = self._shared, self.workers
        resets = np.flatnonzero(reset_mask).tolist()
        stepping = [i for i in range(self.num_envs) if not reset_mask[i]] if resets else range(self.num_envs)
        try:
            shared.actions[:] = actions
            shared.same_step[0] = same_step
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
