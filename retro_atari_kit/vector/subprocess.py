"""Shared-memory subprocess backend: one env per worker process, frames written into shared memory.

Each worker builds its per-env stack *without* a frame stack, so one ``(C, H, W)`` frame per env and step is
written into a shared-memory array; rewards, flags and infos travel over a pipe. Frame stacking happens in
the main process (:class:`StackedVectorEnv`). This is the backend for stable-retro (one emulator per
process) and the fallback for ALE kwargs the native backend cannot express.

Robustness comes from the one child-process host (:mod:`retro_atari_kit.processes`): every wait on a worker
also watches its process, so a worker that dies makes the call raise :class:`WorkerDiedError` naming the env
rank at once (no hang); all workers are then shut down. An env's exception reaches the caller as itself.
Workers ignore SIGINT, so Ctrl-C reaches only the main process, which closes them. ``close()`` asks
workers to exit, then terminates/kills stragglers and joins them all (no zombies); it is idempotent.
"""

from __future__ import annotations

from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.processes import (
    ChildDiedError,
    ChildProcess,
    default_start_method,
    receive_all,
    serve,
    stop_all,
)
from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._stacked import Seeds, StackedVectorEnv

START_METHODS = ("fork", "forkserver", "spawn")


class WorkerDiedError(ChildDiedError):
    """A worker process of the subprocess backend died; ``rank`` is the env index it ran."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


class _EnvWorker:
    """The worker's side (run by :func:`~retro_atari_kit.processes.serve`): one env and its two frame slots
    in shared memory (slot 0: the current frame; slot 1: the final frame of an episode that autoreset)."""

    def __init__(self, rank: int, factory: EnvFactory):
        self.rank = rank
        self.env = factory()  # construction errors (bad kwargs, missing ROM) reach the caller as themselves
        self.shm: SharedMemory | None = None
        self.frames: np.ndarray | None = None

    def hello(self) -> tuple:
        meta = dict(self.env.metadata)
        meta["render_mode"] = self.env.render_mode
        return self.env.observation_space, self.env.action_space, meta

    def handle(self, command: str, data: Any) -> Any:
        env, frames = self.env, self.frames
        if command == "step":
            action, same_step = data
            obs, reward, terminated, truncated, info = env.step(action)
            final_info = None
            if same_step and (terminated or truncated):
                frames[1] = obs
                final_info = info
                obs, info = env.reset()
            frames[0] = obs
            return float(reward), bool(terminated), bool(truncated), info, final_info
        if command == "reset":
            seed, options = data
            obs, info = env.reset(seed=seed, options=options)
            frames[0] = obs
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
            self.shm = _attach_untracked(data)
            shape = env.observation_space.shape
            offset = 2 * self.rank * int(np.prod(shape))
            self.frames = np.ndarray((2, *shape), dtype=np.uint8, buffer=self.shm.buf, offset=offset)
            return None
        raise ValueError(f"unknown worker command {command!r}")

    def close(self) -> None:
        try:
            self.env.close()
        finally:
            if self.shm is not None:
                self.frames = None  # release the buffer view before closing the segment
                self.shm.close()


def _attach_untracked(name: str) -> SharedMemory:
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


def _start_worker(rank: int, factory: EnvFactory, start_method: str) -> ChildProcess:
    game = getattr(factory, "game", None)
    return ChildProcess(
        serve,
        (_EnvWorker, rank, factory),
        who=f"env rank {rank} (RetroKit/{game}-v0): its worker process"
        if game
        else f"env rank {rank}: its worker process",
        name=f"retrokit-env-{rank}",
        context=start_method,
        advice="the vector env is closed, make a new one",
        died=lambda message: WorkerDiedError(rank, message),
    )


class SubprocessDriver:
    """Runs one env per worker process; frames in shared memory, everything else over pipes."""

    def __init__(self, factories: list[EnvFactory], start_method: str | None = None, timeout: float = 60.0):
        if start_method is None:
            start_method = default_start_method()
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}; got {start_method!r}")
        self.num_envs = len(factories)
        self.timeout = timeout
        self.start_method = start_method
        self.closed = False
        self._broken: BaseException | None = None
        self._shm: SharedMemory | None = None
        self.workers: list[ChildProcess] = []
        try:
            for rank, factory in enumerate(factories):
                self.workers.append(_start_worker(rank, factory, start_method))
            spaces = receive_all(self.workers, self.timeout)
            self.frame_space, self.action_space, self.metadata = spaces[0]
            shape = self.frame_space.shape
            self._shm = SharedMemory(create=True, size=2 * self.num_envs * int(np.prod(shape)))
            for worker in self.workers:
                worker.send("shm", self._shm.name)
            receive_all(self.workers, self.timeout)
            both = np.ndarray((self.num_envs, 2, *shape), dtype=np.uint8, buffer=self._shm.buf)
            self.frames = both[:, 0]
            self._final_frames = both[:, 1]
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
        """Send ``(rank, command, data)`` messages; the workers sent to, in order. A message whose data cannot
        be sent (it does not pickle: nothing of it reaches the pipe) raises, after the answers of the messages
        already sent have been read, so no answer waits in a pipe for a later call to take as its own."""
        sent: list[ChildProcess] = []
        try:
            for rank, command, data in messages:
                self.workers[rank].send(command, data)
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
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terms = np.zeros(n, dtype=bool)
        truncs = np.zeros(n, dtype=bool)
        infos: list[dict] = []
        finals: dict[int, tuple[np.ndarray, dict]] = {}
        try:
            messages = [
                (i, "reset", (None, None)) if reset_mask[i] else (i, "step", (actions[i], same_step))
                for i in range(n)
            ]
            results = receive_all(self._send_each(messages))  # an env's error: raised after every answer
        except ChildDiedError as exc:
            self._died(exc)
            raise
        for i, result in enumerate(results):
            if reset_mask[i]:
                infos.append(result)
                continue
            rewards[i], terms[i], truncs[i], info, final_info = result
            if final_info is not None:
                finals[i] = (self._final_frames[i].copy(), final_info)
            infos.append(info)
        return rewards, terms, truncs, infos, finals

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
        """Ask workers to exit, terminate/kill any that do not within a second, join all. Idempotent."""
        if self.closed:
            return
        self.closed = True
        stop_all(self.workers)  # bounded even here: close() must never hang
        if self._shm is not None:
            self.frames = self._final_frames = None  # type: ignore[assignment]
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
