"""EnvPool-style asynchronous stepping of the native ALE backend: ``send`` actions, ``recv`` whichever envs
are done first.

``gym.make_vec(id, num_envs=N, batch_size=B)`` returns a :class:`AsyncNativeVectorEnv`: a normal gymnasium
vector env (``reset`` / ``step`` over all N envs, as without ``batch_size``) with EnvPool's async calls on
top (the same names and meaning as EnvPool's ``async_reset`` / ``send`` / ``recv``):

- ``async_reset(seed=None)``: reset every env; their first observations come from the next ``recv`` calls.
- ``send(actions, env_ids)``: start one step of each env in ``env_ids`` (an env whose episode ended at its
  last step is reset instead, its action ignored: gymnasium's ``NEXT_STEP`` autoreset, as EnvPool's).
- ``recv()``: wait for the first ``B`` envs to finish and return ``(obs, rewards, terminations,
  truncations, info)`` for them, ``B`` rows in the order they finished; ``info["env_id"]`` says which env
  each row is. The true score is in ``info["episode"]`` (mask ``info["_episode"]``) as in ``step``.

With ``B < N`` the learner computes the actions of one batch while the emulator threads step the others, so
the policy and the emulators overlap (EnvPool's "async halves": ``B = N // 2``). Each env's trajectory is the
one ``step`` would give for the same actions and seed, frame for frame: the same driver steps and warps it,
only the moment it is returned differs. The per-step work of a batch (rules, stacking) is done in ``recv``
for the batch at once.

How: ``send`` hands each env's action to its C++ emulator at once (so all of them emulate in parallel), then
queues a task on the warp thread that owns the env; the task receives that env's step (or runs its reset
rules), warps its frame and puts the env on a ready queue, which ``recv`` reads. ``reset`` and ``step`` may
only be called when no env is in flight (every ``send`` answered by ``recv``), and ``send`` only to envs that
are not in flight; both are checked and refused in one line. As for ``step``, a call while another thread is
inside one on the same env is refused (``send`` and ``recv`` from one thread, or behind one lock). One
process only: ``batch_size`` does not combine with ``shards`` > 1.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from retro_atari_kit.envs._validate import check_actions
from retro_atari_kit.vector._stacked import StackedVectorEnv, one_thread_at_a_time
from retro_atari_kit.vector.native_ale import _PADDLE, NativeDriver, _extra
from retro_atari_kit.wrappers.warp_frame import warp_into


class _Failed:
    """Put on the ready queue instead of an env index when a task failed: ``recv`` raises ``error``."""

    def __init__(self, error: BaseException):
        self.error = error


class AsyncNativeDriver(NativeDriver):
    """:class:`NativeDriver` with per-env tasks on its warp threads, for :class:`AsyncNativeVectorEnv`."""

    def __init__(self, game: str, num_envs: int, cfg: dict[str, Any]):
        super().__init__(game, num_envs, cfg)
        # envs whose task is done (or a _Failed), in finishing order. recv sleeps on _latch until the task
        # that completes its batch wakes it: one wake-up per recv, not one per env (each wake-up of a
        # sleeping thread costs the waker its time slice while it holds the GIL). _token holds one claim
        # per wait, so exactly one thread releases the latch for it (list.pop is atomic under the GIL).
        self._ready: collections.deque = collections.deque()
        self._wanted = 0
        self._token: list[bool] = []
        self._latch = threading.Lock()
        self._latch.acquire()
        self._was_reset = np.zeros(num_envs, dtype=bool)  # the env's last task was a reset
        self._reset_infos: list[dict] = [{} for _ in range(num_envs)]
        self._grayscale, self._crop = cfg["grayscale"], cfg["crop_score"]

    def _thread_of(self, env: int) -> int:
        return env * self.warper.threads // self.num_envs  # contiguous blocks, as the synchronous steps

    def send(self, env_ids: list[int], actions: list[int], resetting: list[bool]) -> None:
        """Start a step (or, where ``resetting``, a reset) of each env in ``env_ids``."""
        tasks: dict[int, list[tuple[int, bool]]] = {}
        for i, action, reset in zip(env_ids, actions, resetting, strict=True):
            if not reset:
                self._ales[i].send([action], _PADDLE)  # emulation starts now, in the env's C++ thread
            tasks.setdefault(self._thread_of(i), []).append((i, reset))
        for thread, envs in tasks.items():  # one wake-up per warp thread, not per env
            self.warper.run_on(thread, lambda envs=envs: self._run_tasks(envs))

    def _run_tasks(self, envs: list[tuple[int, bool]]) -> None:
        for i, reset in envs:
            if reset:
                self._reset_task(i)
            else:
                self._step_task(i)

    def _step_task(self, i: int) -> None:
        try:
            warp_into(self._receive(i), self.frames[i], self._grayscale, self._crop)
            self._was_reset[i] = False
            self.done(i)
        except BaseException as exc:  # handed to recv
            self.done(_Failed(exc))

    def _reset_task(self, i: int) -> None:
        try:
            self._reset_infos[i] = _extra(self._reset_env(i, None))
            warp_into(self._raw[i], self.frames[i], self._grayscale, self._crop)
            self._was_reset[i] = True
            self.done(i)
        except BaseException as exc:
            self.done(_Failed(exc))

    def done(self, item: int | _Failed) -> None:
        """Env ``item``'s step or reset is ready for ``recv`` (or its task failed)."""
        self._ready.append(item)
        if self._wanted and len(self._ready) >= self._wanted and self._claim():
            self._latch.release()

    def _claim(self) -> bool:
        try:
            return self._token.pop()
        except IndexError:
            return False

    def _take(self, batch_size: int) -> list[int | _Failed]:
        """The first ``batch_size`` ready items, waiting for them."""
        ready = self._ready
        while len(ready) < batch_size:
            self._token = [True]
            self._wanted = batch_size
            if len(ready) >= batch_size and self._claim():
                break  # the batch completed while arming, and no task took the claim: nothing to wait for
            self._latch.acquire()  # released by the task that took the claim
        self._wanted = 0
        return [ready.popleft() for _ in range(batch_size)]

    def recv(self, batch_size: int):
        """The first ``batch_size`` envs to finish: ``(env_ids, was_reset, rewards, terminations,
        truncations, extra)``, one row per env in finishing order (``was_reset`` None when no row was a
        reset); ``extra`` maps a row to that env's info keys beyond ALE's counters (``episode``, a reset's
        keys)."""
        rows = []
        failure = None
        for item in self._take(batch_size):
            if isinstance(item, _Failed):
                failure = failure or item.error  # the other envs still answer: take them all first
            else:
                rows.append(item)
        if failure is not None:
            raise failure
        envs = np.asarray(rows, dtype=np.intp)
        was_reset = self._was_reset[envs]
        any_reset = bool(was_reset.any())
        n = self.num_envs
        rewards, terms, truncs = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        stepped = envs[~was_reset] if any_reset else envs
        extra = {}
        if stepped.size and self._finish(stepped, rewards, terms, truncs, True, self.clip):
            row_of = {i: row for row, i in enumerate(rows)}
            for i, episode in self._episodes(stepped).items():
                extra[row_of[i]] = {"episode": episode}
        if any_reset:
            for row in np.flatnonzero(was_reset).tolist():
                extra[row] = self._reset_infos[rows[row]]
        return envs, was_reset if any_reset else None, rewards[envs], terms[envs], truncs[envs], extra


class _Rows:
    """What gymnasium's ``VectorEnv._add_info`` needs to batch infos over ``num_envs`` rows."""

    _add_info = VectorEnv._add_info

    def __init__(self, num_envs: int):
        self.num_envs = num_envs


class AsyncNativeVectorEnv(StackedVectorEnv):
    """The native backend with EnvPool's ``async_reset`` / ``send`` / ``recv`` (module docstring).

    ``_autoreset[i]`` (the base class's NEXT_STEP flag) is set when env ``i``'s episode ended, whether by
    ``step`` or by ``recv``, so the next ``step`` or ``send`` resets it either way."""

    def __init__(self, driver: AsyncNativeDriver, frame_stack: int, batch_size: int):
        super().__init__(driver, frame_stack, AutoresetMode.NEXT_STEP, backend="native")
        self.batch_size = batch_size
        self._in_flight = np.zeros(self.num_envs, dtype=bool)
        self._flying = 0  # how many envs are in flight

    def _check_idle(self, call: str) -> None:
        if self._flying:
            raise RuntimeError(
                f"{call}() while {self._flying} envs are in flight: call recv() until every send() is "
                "answered first"
            )

    def reset(self, *, seed=None, options=None):
        self._check_idle("reset")
        return super().reset(seed=seed, options=options)

    def step(self, actions):
        self._check_idle("step")
        return super().step(actions)

    @one_thread_at_a_time
    def async_reset(self, seed: int | list[int | None] | None = None) -> None:
        """Reset every env (seeds as ``reset``); the next ``recv()`` calls return their first observations."""
        self._check_idle("async_reset")
        self.reset(seed=seed)
        driver = self.driver
        for i in range(self.num_envs):
            driver._was_reset[i] = True
            driver._reset_infos[i] = {}
            driver.done(i)
        self._in_flight[:] = True
        self._flying = self.num_envs

    @one_thread_at_a_time
    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Start one step of each env in ``env_ids`` (None: every env), ``actions[k]`` for ``env_ids[k]``."""
        self._check_open()
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.size == 0:
            raise ValueError(f"env_ids must be a non-empty 1-D array of env indices; got {env_ids!r}")
        env_list = ids.tolist()
        if min(env_list) < 0 or max(env_list) >= self.num_envs or len(set(env_list)) != len(env_list):
            raise ValueError(f"env_ids must be distinct indices in [0, {self.num_envs - 1}]; got {env_list}")
        if self._in_flight[ids].any():
            busy = [i for i in env_list if self._in_flight[i]]
            raise RuntimeError(f"send() to envs {busy} that are still in flight: recv() them first")
        values = check_actions(actions, self.single_action_space, len(env_list)).tolist()
        self._in_flight[ids] = True
        self._flying += len(env_list)
        self.driver.send(env_list, values, self._autoreset[ids].tolist())

    @one_thread_at_a_time
    def recv(self):
        """``(obs, rewards, terminations, truncations, info)`` of the first ``batch_size`` envs to finish;
        ``info["env_id"]`` names them."""
        self._check_open()
        if self._flying < self.batch_size:
            raise RuntimeError(
                f"recv() returns batch_size={self.batch_size} envs and {self._flying} are in flight: "
                "send() more first"
            )
        envs, was_reset, rewards, terms, truncs, extra = self.driver.recv(self.batch_size)
        self._in_flight[envs] = False
        self._flying -= len(envs)
        frames, c = self.driver.frames, self.channels
        stepped = envs if was_reset is None else envs[~was_reset]
        stacks = self._stacks[stepped]  # a copy: shifting it in place is safe
        stacks[:, :-c] = stacks[:, c:]
        stacks[:, -c:] = frames[stepped]
        self._stacks[stepped] = stacks
        if was_reset is not None:
            for i in envs[was_reset].tolist():
                self._fill(i, frames[i])
            stacks = self._stacks[envs]  # the batch in finishing order
        self._autoreset[envs] = terms | truncs
        infos: dict[str, Any] = {"env_id": envs.astype(np.int32)}
        for key, values in self.driver.counters().items():
            infos[key] = values[envs]
        rows = _Rows(len(envs))
        for row, info in extra.items():
            infos = rows._add_info(infos, info, row)
        return stacks, rewards, terms, truncs, infos

    def close_extras(self, **kwargs: Any) -> None:
        self._in_flight[:] = False
        self._flying = 0
        super().close_extras(**kwargs)
