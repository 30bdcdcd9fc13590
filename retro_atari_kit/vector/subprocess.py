"""Shared-memory subprocess backend: one env per worker process, frames written into shared memory.

Each worker builds its per-env stack *without* a frame stack, so one ``(C, H, W)`` frame per env and step is
written into a shared-memory array; rewards, flags and infos travel over a pipe. Frame stacking happens in
the main process (:class:`StackedVectorEnv`). This is the backend for stable-retro (one emulator per
process) and the fallback for ALE kwargs the native backend cannot express.

Robustness: every wait on a worker also watches its process sentinel, so a worker that dies makes the call
raise :class:`WorkerDiedError` naming the env rank at once (no hang); all workers are then shut down.
Workers ignore SIGINT, so Ctrl-C reaches only the main process, which closes them. ``close()`` asks
workers to exit, then terminates/kills stragglers and joins them all (no zombies); it is idempotent.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import traceback
from multiprocessing.connection import Connection, wait
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.processes import (
    default_start_method,
    end_process,
    picklable_exception,
    worker_start_hint,
)
from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._stacked import Seeds, StackedVectorEnv

START_METHODS = ("fork", "forkserver", "spawn")


class WorkerDiedError(RuntimeError):
    """A worker process of the subprocess backend died; ``rank`` is the env index it ran."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


class WorkerError(RuntimeError):
    """An env raised inside a worker; the message names the rank and holds the worker's traceback."""


def _worker(rank: int, conn: Connection, parent_end: Connection | None, factory: EnvFactory) -> None:
    """Worker main loop: build the env, report its spaces, then serve commands until ``close``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is handled by the main process
    if parent_end is not None:
        parent_end.close()
    env = None
    shm = None
    try:
        try:
            env = factory()
        except Exception as exc:  # report construction errors (bad kwargs, missing ROM) to the main process
            conn.send(("error", picklable_exception(exc), traceback.format_exc()))
            return
        meta = dict(env.metadata)
        meta["render_mode"] = env.render_mode
        conn.send(("ok", (env.observation_space, env.action_space, meta)))
        cmd, shm_name = conn.recv()
        shm = _attach_untracked(shm_name)
        shape = env.observation_space.shape
        offset = 2 * rank * int(np.prod(shape))
        frames = np.ndarray((2, *shape), dtype=np.uint8, buffer=shm.buf, offset=offset)
        conn.send(("ok", None))
        while True:
            cmd, data = conn.recv()
            try:
                if cmd == "step":
                    action, same_step = data
                    obs, reward, terminated, truncated, info = env.step(action)
                    final_info = None
                    if same_step and (terminated or truncated):
                        frames[1] = obs
                        final_info = info
                        obs, info = env.reset()
                    frames[0] = obs
                    conn.send(("ok", (float(reward), bool(terminated), bool(truncated), info, final_info)))
                elif cmd == "reset":
                    seed, options = data
                    obs, info = env.reset(seed=seed, options=options)
                    frames[0] = obs
                    conn.send(("ok", info))
                elif cmd == "call":
                    name, args, kwargs = data
                    attr = getattr(env, name)
                    conn.send(("ok", attr(*args, **kwargs) if callable(attr) else attr))
                elif cmd == "set_attr":
                    name, value = data
                    setattr(env, name, value)
                    conn.send(("ok", None))
                elif cmd == "close":
                    break
                else:
                    raise ValueError(f"unknown worker command {cmd!r}")
            except Exception as exc:
                conn.send(("error", picklable_exception(exc), traceback.format_exc()))
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # main process gone or closing: just exit
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                pass
        if shm is not None:
            del frames  # noqa: F821  (release the buffer view before closing the segment)
            shm.close()
        try:
            conn.close()
        except OSError:
            pass


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
        self.started = False  # True once every worker has answered (see _dead)
        self.closed = False
        self._broken: BaseException | None = None
        self._shm: SharedMemory | None = None
        ctx = mp.get_context(start_method)
        self.conns: list[Connection] = []
        self.processes: list[mp.process.BaseProcess] = []
        try:
            for rank, factory in enumerate(factories):
                parent_end, child_end = ctx.Pipe()
                inherited = parent_end if start_method == "fork" else None
                proc = ctx.Process(
                    target=_worker,
                    args=(rank, child_end, inherited, factory),
                    name=f"retrokit-env-{rank}",
                    daemon=True,
                )
                proc.start()
                child_end.close()
                self.conns.append(parent_end)
                self.processes.append(proc)
            spaces = [self._recv(rank, self.timeout) for rank in range(self.num_envs)]
            self.frame_space, self.action_space, self.metadata = spaces[0]
            shape = self.frame_space.shape
            frame_bytes = int(np.prod(shape))
            self._shm = SharedMemory(create=True, size=2 * self.num_envs * frame_bytes)
            for conn in self.conns:
                conn.send(("shm", self._shm.name))
            for rank in range(self.num_envs):
                self._recv(rank, self.timeout)
            both = np.ndarray((self.num_envs, 2, *shape), dtype=np.uint8, buffer=self._shm.buf)
            self.frames = both[:, 0]
            self._final_frames = both[:, 1]
            self.started = True
        except BaseException:
            self.close()
            raise

    # -- messaging -----------------------------------------------------------------------------------
    def _dead(self, rank: int) -> WorkerDiedError:
        proc = self.processes[rank]
        proc.join(0.1)
        code = proc.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        message = f"env rank {rank}: its worker process (pid {proc.pid}) {how}"
        if not self.started and self.start_method != "fork":
            message += f" while starting. {worker_start_hint(self.start_method)}"
        return WorkerDiedError(rank, message + "; the vector env is closed, make a new one")

    def _fail(self, exc: BaseException) -> None:
        self._broken = exc
        self.close()
        raise exc

    def _send(self, rank: int, message: tuple) -> None:
        try:
            self.conns[rank].send(message)
        except (BrokenPipeError, EOFError, OSError):
            self._fail(self._dead(rank))

    def _recv(self, rank: int, timeout: float | None = None) -> Any:
        conn, proc = self.conns[rank], self.processes[rank]
        ready = wait([conn, proc.sentinel], timeout)
        if not ready:
            message = f"env rank {rank}: no answer from its worker (pid {proc.pid}) in {timeout}s"
            self._fail(TimeoutError(message))
        try:
            if conn not in ready and not conn.poll():
                self._fail(self._dead(rank))
            message = conn.recv()
        except (EOFError, OSError):
            self._fail(self._dead(rank))
        if message[0] == "error":
            _, exc, tb = message
            if isinstance(exc, (ValueError, TypeError, KeyError, FileNotFoundError)):
                raise exc  # a clear user-facing error from the env (bad kwarg, missing ROM)
            raise WorkerError(
                f"env rank {rank} raised {type(exc).__name__}: {exc}\n--- worker traceback ---\n{tb}"
            )
        return message[1]

    def _check(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self.closed:
            raise RuntimeError("the subprocess vector env is closed")

    # -- driver API --------------------------------------------------------------------------------
    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        self._check()
        for i, seed in zip(indices, seeds, strict=True):
            self._send(i, ("reset", (seed, options)))
        return [self._recv(i) for i in indices]

    def step(self, actions: np.ndarray, reset_mask: np.ndarray, same_step: bool):
        self._check()
        n = self.num_envs
        for i in range(n):
            if reset_mask[i]:
                self._send(i, ("reset", (None, None)))
            else:
                self._send(i, ("step", (actions[i], same_step)))
        rewards = np.zeros(n, dtype=np.float64)
        terms = np.zeros(n, dtype=bool)
        truncs = np.zeros(n, dtype=bool)
        infos: list[dict] = []
        finals: dict[int, tuple[np.ndarray, dict]] = {}
        for i in range(n):
            result = self._recv(i)
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
        for i in range(self.num_envs):
            self._send(i, ("call", (name, args, kwargs)))
        return [self._recv(i) for i in range(self.num_envs)]

    def set_attr(self, name: str, values: list[Any]) -> None:
        self._check()
        for i, value in enumerate(values):
            self._send(i, ("set_attr", (name, value)))
        for i in range(self.num_envs):
            self._recv(i)

    def close(self) -> None:
        """Ask workers to exit, terminate/kill any that do not within a second, join all. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for conn, proc in zip(self.conns, self.processes, strict=True):
            if proc.is_alive():
                try:
                    conn.send(("close", None))
                except (BrokenPipeError, EOFError, OSError):
                    pass
        for proc in self.processes:
            end_process(proc)  # bounded even here: close() must never hang
        for conn in self.conns:
            conn.close()
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
        return [p.pid for p in self.processes]


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
