"""A stable-retro env hosted in a worker process, behind the same ``gym.Env`` interface.

stable-retro allows one emulator per process. When this process already has one, :func:`make_retro_env`
returns a :class:`RetroWorkerEnv`: the whole kit stack is built by ``make_retro_env`` (which it is given: this
module never imports ``envs.retro``, which imports it) in a fresh worker process (``forkserver``, else
``spawn``: a forked child would inherit the parent's emulator and could not start its own), and every call
travels over a pipe. Frames, rewards, flags, infos, ``render()`` frames and exceptions (same type and message)
are the worker env's own, so for the same seed and actions the env behaves exactly like an in-process one;
only ``env.unwrapped`` differs (it is this proxy: use ``env.get_wrapper_attr(name)`` to reach attributes of
the stack, e.g. ``get_action_meanings``).

Lifetime: the worker ends with ``close()``, when the env is garbage collected, or at interpreter exit (it is a
daemon process), so no process outlives its env. It ignores SIGINT, SIGTERM and SIGHUP (a stop sent to the
whole process group, as Ctrl-C, systemd or Slurm do, is the main process's to handle), which closes the
worker. Every wait on the worker also watches its process, so a worker that dies makes the next call raise
:class:`EnvWorkerDiedError` naming the env at once, never a hang.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from retro_atari_kit.envs._validate import check_action, check_seed
from retro_atari_kit.processes import ChildDiedError, ChildProcess, default_start_method, serve

START_TIMEOUT = 120.0  # seconds for a worker to import the kit and start its emulator on busy cores


class EnvWorkerDiedError(ChildDiedError):
    """The worker process hosting a :class:`RetroWorkerEnv` died; the env is closed."""


class _RetroServer:
    """The worker's side (run by :func:`~retro_atari_kit.processes.serve`): the whole kit stack, built by
    ``make`` (``envs.retro.make_retro_env``, pickled by reference: unpickling it in the worker imports
    ``retro_atari_kit``, which registers the IDs)."""

    def __init__(self, make: Callable[..., gym.Env], game: str, kwargs: dict[str, Any]):
        self.env = make(game, **kwargs)  # bad kwargs, missing ROM: re-raised in the main process

    def hello(self) -> dict[str, Any]:
        return _describe(self.env)

    def handle(self, command: str, data: Any) -> Any:
        return _run(self.env, command, data)

    def close(self) -> None:
        self.env.close()


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


class RetroWorkerEnv(gym.Env):
    """``make(game, **kwargs)`` run in a worker process; see the module docstring. ``make`` is the single-env
    builder (``make_retro_env``, passed in by its module so that this one never imports it back), a
    module-level function the worker can unpickle.

    ``spec`` is the spec ``gym.make`` sets plus the stack's wrappers and time limit, so it equals the spec
    of an in-process env. ``worker_pid`` is the worker's process id.
    """

    reports_true_scores = True  # the stack in the worker writes the kit's true-score record

    def __init__(
        self,
        make: Callable[..., gym.Env],
        game: str,
        kwargs: dict[str, Any],
        env_id: str,
        start_method: str | None = None,
    ):
        if start_method is None:
            start_method = default_start_method()
        if start_method not in ("forkserver", "spawn"):
            raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r}")
        self.env_id = env_id
        self._closed = False
        self._base_spec: EnvSpec | None = None
        self._worker = ChildProcess(
            serve,
            (_RetroServer, make, game, dict(kwargs)),
            who=f"{env_id}: the worker process",
            name=f"retrokit-{env_id}",
            context=start_method,
            advice=(
                f"the env is closed: make a new one with gym.make({env_id!r}), or close other stable-retro "
                "envs to run it in-process (stable-retro allows one emulator per process, so this env ran "
                "in a process of its own)"
            ),
            died=EnvWorkerDiedError,
            grace=5.0,
        )
        # on garbage collection and at interpreter exit; holds no reference to self
        self._finalizer = weakref.finalize(self, self._worker.stop)
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
        return self._worker.pid

    # -- gym.Env API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        seed = check_seed(seed)  # here, not in the worker: a refused call never reaches the pipe
        super().reset(seed=seed)  # this proxy's np_random follows the seed, as gymnasium's checker expects
        return self._request(("reset", (seed, options)))

    def step(self, action):
        return self._request(("step", check_action(action, self.action_space)))

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
        re-raise the worker's exception; raise :class:`EnvWorkerDiedError` if the worker died (the env is
        then closed)."""
        if self._closed and self._worker.broken is None:
            raise RuntimeError(f"{self.env_id}: the env is closed; make a new one with gym.make")
        try:
            if message is not None:
                self._worker.send(*message)
            return self._worker.receive(timeout)
        except (ChildDiedError, KeyboardInterrupt):  # after Ctrl-C an answer may be pending: out of step
            self.close()
            raise
