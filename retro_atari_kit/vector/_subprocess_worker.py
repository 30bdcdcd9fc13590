"""The worker side of the subprocess backend: one env, its slots in shared memory, and its semaphore.

The layout of the one shared-memory segment (:class:`Shared`) is computed the same way in the main process
and in every worker. A worker woken by its semaphore steps its env with the action in shared memory and writes
the frame, reward, flags and info there; an info that does not fit (other types, more keys, the true score
at a game's end), an env's exception, and every other command travel over its pipe.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from retro_atari_kit.processes import ChildWakeup, reply, reply_error
from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._pool import IN_MEMORY, ON_PIPE, SharedLayout, WakeupWorker

MAX_INFO_KEYS = 64  # an info with more keys travels over the pipe
_INFO_TYPES = (int, float, bool)  # the types StackedVectorEnv batches into one array per key

Schema = tuple[tuple[str, ...], tuple[type, ...]]  # an info's keys in order, and each value's type


class Shared(SharedLayout):
    """Numpy views of the one shared-memory segment: frames (two slots per env: the current frame, and the
    final frame of an episode that autoreset within its step) and the step block."""

    def __init__(self, buffer: Any, n: int, frame_shape: tuple[int, ...]):
        super().__init__()
        both = self._take(buffer, (n, 2, *frame_shape), np.uint8)
        self.frames, self.final_frames, self.both = both[:, 0], both[:, 1], both
        self.actions = self._take(buffer, (n,), np.int64)
        self.same_step = self._take(buffer, (1,), np.uint8)
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
            final_info = None
            if shared.same_step[0] and (terminated or truncated):
                shared.both[rank, 1] = obs
                final_info = info
                obs, info = self.env.reset()
            shared.both[rank, 0] = obs
            shared.rewards[rank] = float(reward)
            shared.flags[rank, 0] = bool(terminated)
            shared.flags[rank, 1] = bool(truncated)
            if final_info is not None or not self._write_info(info):
                schema = info_schema(info) if final_info is None else None
                reply(conn, (info, final_info, schema))  # an unpicklable info raises here, as before
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
            self.shared.both[self.rank, 0] = obs
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
