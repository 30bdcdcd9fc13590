"""A stable-retro env hosted in a worker process, behind the same ``gym.Env`` interface.

stable-retro allows one emulator per process. When this process already has one, :func:`make_retro_env`
returns a :class:`RetroWorkerEnv`: the whole kit stack is built by ``make_retro_env`` in a fresh worker
process (``forkserver``, else ``spawn``: a forked child would inherit the parent's emulator and could not
start its own), and every call travels over a pipe. Frames, rewards, flags, infos, ``render()`` frames and
exceptions (same type and message) are the worker env's own, so for the same seed and actions the env
behaves exactly like an in-process one; only ``env.unwrapped`` differs (it is this proxy: use
``env.get_wrapper_attr(name)`` to reach attributes of the stack, e.g. ``get_action_meanings``).

Lifetime: the worker ends with ``close()``, when the env is garbage collected, or at interpreter exit (it is
a daemon process), so no process outlives its env. It ignores SIGINT: Ctrl-C reaches only the main process,
which closes the worker. Every wait on the worker also watches its process, so a worker that dies makes
the next call raise :class:`EnvWorkerDiedError` naming the env at once, never a hang.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import signal
import traceback
import weakref
from multiprocessing.connection import Connection, wait
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from retro_atari_kit.processes import (
    default_start_method,
    end_process,
    picklable_exception,
    worker_start_hint,
)

START_TIMEOUT = 120.0  # seconds for a worker to import the kit and start its emulator (2 busy cores)


class EnvWorkerDiedError(RuntimeError):
    """The worker process hosting a :class:`RetroWorkerEnv` died; the env is closed."""


def _serve(conn: Connection, game: str, kwargs: dict[str, Any]) -> None:
    """Worker main loop: build the stack, describe it, then answer commands until ``close`` or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is handled by the main process
    from retro_atari_kit.envs.retro import make_retro_env  # imports retro_atari_kit: registers the IDs

    env = None
    try:
        try:
            env = make_retro_env(game, **kwargs)
        except Exception as exc:  # bad kwargs, missing ROM: re-raised in the main process
            conn.send(("error", picklable_exception(exc), traceback.format_exc()))
            return
        conn.send(("ok", _describe(env)))
        while True:
            cmd, data = conn.recv()
            if cmd == "close":
                env.close()
                env = None
                conn.send(("ok", None))
                return
            try:
                conn.send(("ok", _run(env, cmd, data)))
            except Exception as exc:
                conn.send(("error", picklable_exception(exc), traceback.format_exc()))
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the main process is gone or closing
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                pass
        conn.close()


def _describe(env: gym.Env) -> dict[str, Any]:
    """What the proxy needs to look like ``env``: spaces, metadata, render mode and the stack's part of the
    spec (its wrappers and time limit), read with a placeholder base spec since ``gym.make`` sets the real
    one on the proxy."""
    env.unwrapped.spec = EnvSpec(id="RetroKit/placeholder-v0")
    spec = env.spec
    return {
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "metadata": dict(env.metadata),
        "render_mode": env.render_mode,
        "wrappers": spec.additional_wrappers if spec is not None else (),
        "max_episode_steps": spec.max_episode_steps if spec is not None else None,
    }


def _run(env: gym.Env, cmd: str, data: Any) -> Any:
    if cmd == "step":
        return env.step(data)
    if cmd == "reset":
        seed, options = data
        return env.reset(seed=seed, options=options)
    if cmd == "render":
        return env.render()
    if cmd == "get_attr":
        value = env.get_wrapper_attr(data)
        return ("callable", None) if callable(value) else ("value", value)
    if cmd == "call":
        name, args, kwargs = data
        return env.get_wrapper_attr(name)(*args, **kwargs)
    if cmd == "has_attr":
        return env.has_wrapper_attr(data)
    if cmd == "set_attr":
        name, value, force = data
        # gymnasium < 1.3 has no ``force``; its behaviour is force=True
        return env.set_wrapper_attr(name, value) if force else env.set_wrapper_attr(name, value, force=False)
    raise ValueError(f"unknown worker command {cmd!r}")


def _stop(conn: Connection, proc: mp.process.BaseProcess) -> None:
    """Ask the worker to exit, then terminate/kill it if it does not; bounded, never hangs."""
    if proc.is_alive():
        try:
            conn.send(("close", None))
            if wait([conn, proc.sentinel], 5.0) and conn.poll():
                conn.recv()
        except (BrokenPipeError, EOFError, OSError):
            pass
    end_process(proc, grace=2.0)
    conn.close()


class RetroWorkerEnv(gym.Env):
    """``make_retro_env(game, **kwargs)`` run in a worker process; see the module docstring.

    ``spec`` is the spec ``gym.make`` sets plus the stack's wrappers and time limit, so it equals the spec
    of an in-process env. ``worker_pid`` is the worker's process id.
    """

    def __init__(self, game: str, kwargs: dict[str, Any], env_id: str, start_method: str | None = None):
        if start_method is None:
            start_method = default_start_method()
        if start_method not in ("forkserver", "spawn"):
            raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r}")
        self.env_id = env_id
        self._start_method = start_method
        self._closed = False
        self._broken: EnvWorkerDiedError | None = None
        self._base_spec: EnvSpec | None = None
        self._started = False
        ctx = mp.get_context(start_method)
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve, args=(child, game, dict(kwargs)), name=f"retrokit-{env_id}", daemon=True
        )
        self._proc.start()
        child.close()
        # on garbage collection and at interpreter exit; holds no reference to self
        self._finalizer = weakref.finalize(self, _stop, self._conn, self._proc)
        try:
            info = self._request(None, START_TIMEOUT)
        except BaseException:
            self.close()
            raise
        self.observation_space = info["observation_space"]
        self.action_space = info["action_space"]
        self.metadata = info["metadata"]
        self.render_mode = info["render_mode"]
        self._wrappers = tuple(info["wrappers"])
        self._stack_time_limit = info["max_episode_steps"]
        self._started = True

    # -- spec: what gym.make sets, completed with the worker stack's wrappers -----------------------------
    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        if self._base_spec is None:
            return None
        steps = self._stack_time_limit
        return dataclasses.replace(
            self._base_spec,
            additional_wrappers=self._base_spec.additional_wrappers + self._wrappers,
            max_episode_steps=steps if steps is not None else self._base_spec.max_episode_steps,
        )

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._base_spec = value

    @property
    def worker_pid(self) -> int | None:
        return self._proc.pid

    # -- gym.Env API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)  # this proxy's np_random follows the seed, as gymnasium's checker expects
        return self._request(("reset", (seed, options)))

    def step(self, action):
        return self._request(("step", action))

    def render(self):
        return self._request(("render", None))

    def get_wrapper_attr(self, name: str) -> Any:
        """This proxy's attribute if it has one, else the worker stack's (methods become remote calls)."""
        if hasattr(self, name):
            return getattr(self, name)
        kind, value = self._request(("get_attr", name))
        if kind == "callable":
            return lambda *args, **kwargs: self._request(("call", (name, args, kwargs)))
        return value

    def has_wrapper_attr(self, name: str) -> bool:
        return hasattr(self, name) or self._request(("has_attr", name))

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        if hasattr(self, name):
            setattr(self, name, value)
            return True
        return self._request(("set_attr", (name, value, force)))

    def close(self) -> None:
        """Stop the worker (idempotent; also after the worker died)."""
        self._closed = True
        self._finalizer()

    # -- messaging ----------------------------------------------------------------------------------
    def _request(self, message: tuple | None, timeout: float | None = None) -> Any:
        """Send ``message`` (None: only wait for the start-up answer) and return the worker's answer;
        re-raise the worker's exception; raise :class:`EnvWorkerDiedError` if the worker died."""
        if self._broken is not None:
            raise self._broken
        if self._closed:
            raise RuntimeError(f"{self.env_id}: the env is closed; make a new one with gym.make")
        try:
            if message is not None:
                self._conn.send(message)
            ready = wait([self._conn, self._proc.sentinel], timeout)
            if not ready:
                self._die(f"did not start within {timeout:.0f}s")
            if self._conn not in ready and not self._conn.poll():
                self._die(None)
            status, *payload = self._conn.recv()
        except (BrokenPipeError, EOFError, ConnectionResetError):
            self._die(None)
        except KeyboardInterrupt:
            self.close()  # an answer may be pending: the pipe is out of step, so the env cannot go on
            raise
        if status == "error":
            exc, worker_traceback = payload
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised in the worker process hosting {self.env_id}:\n{worker_traceback}")
            raise exc
        return payload[0]

    def _die(self, why: str | None) -> None:
        self._proc.join(0.5)
        code = self._proc.exitcode
        if why is None:
            killed = code is not None and code < 0
            why = f"was killed by signal {-code}" if killed else f"exited (code {code})"
        if not self._started:
            why += f" while starting. {worker_start_hint(self._start_method)}"
        self._broken = EnvWorkerDiedError(
            f"{self.env_id}: the worker process (pid {self._proc.pid}) hosting this env {why}. stable-retro "
            "allows one emulator per process, so this env ran in its own process. The env is closed: make a "
            f"new one with gym.make({self.env_id!r}), or close other stable-retro envs to run it in-process."
        )
        self.close()
        raise self._broken
