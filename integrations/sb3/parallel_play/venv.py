"""``PlayProcessVecEnv``: the trainer's handle on the play process, shaped as an SB3 ``VecEnv``.

SB3's algorithms need a ``VecEnv`` for spaces, seeding and the first ``reset()``; this one forwards those to
the envs in the play process and hands the trainer the steps the player took (:meth:`recv_step`). It cannot
be stepped with actions: the actions are the player's. Use it with :func:`parallel_play_class`.
"""

from __future__ import annotations

import io
import os
import weakref
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.multiprocessing as tmp
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from retro_atari_kit.errors import as_int
from retro_atari_kit.processes import ChildDiedError, ChildProcess
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK

from . import player
from .ring import ALLOWED, CONSUMED, PRODUCED, RingShape, allocate, weights_numel, write_weights

START_TIMEOUT = 300.0  # seconds for the play process to import torch / SB3 and build its envs


class PlayerDiedError(ChildDiedError):
    """The play process ended while training (env error, killed). ``str()`` is one line naming it."""


class PlayProcessVecEnv(VecEnv):
    """``n_envs`` copies of ``env_id`` stepped in one separate play process (built there with
    ``make_vec_env(env_id, n_envs, seed, backend, monitor_dir, **env_kwargs)``, so ``monitor_dir`` gets the
    true game scores as with the synchronous launcher).

    :param ring_slots: vector steps the ring holds (at least the play-ahead bound + 1; 64 is plenty)
    :param frame_channels: channels per stacked frame (default: channels / ``env_kwargs["frame_stack"]`` (4))
    """

    def __init__(
        self,
        env_id: str,
        n_envs: int = 1,
        seed: int | None = 0,
        backend: str = "auto",
        monitor_dir: str | None = None,
        ring_slots: int = 64,
        frame_channels: int | None = None,
        **env_kwargs: Any,
    ) -> None:
        slots = as_int(ring_slots)  # numpy integers too
        if slots is None or slots < 2:
            raise ValueError(f"ring_slots must be an int >= 2, got {ring_slots!r}")
        ring_slots = slots
        self.env_id = env_id
        self.closed = False
        ctx = tmp.get_context("spawn")
        self._played, self._trained = ctx.Semaphore(0), ctx.Semaphore(0)
        env_args = {
            "env_id": env_id,
            "n_envs": n_envs,
            "seed": seed,
            "backend": backend,
            "monitor_dir": monitor_dir,
            **env_kwargs,
        }
        # not a daemon: the player's own vector env may start worker processes; it dies with its parent
        self._player = ChildProcess(
            player.main,
            ((self._played, self._trained), env_args, os.getpid()),
            who=f"the play process of {env_id}",
            name=f"play {env_id}",
            context=ctx,
            died=PlayerDiedError,
            grace=10.0,
            daemon=False,
        )
        self._finalizer = weakref.finalize(self, self._player.stop)  # also at exit; no reference to self
        try:
            obs_space, action_space = self._player.receive(START_TIMEOUT)
            shape = obs_space.shape
            frame_stack = int(env_kwargs.get("frame_stack", DEFAULT_FRAME_STACK))
            c = frame_channels or max(1, shape[0] // frame_stack)
            if shape[0] % c:
                raise ValueError(f"frame_channels={c} does not divide the observation's {shape[0]} channels")
            self._c = c
            tensors = allocate(RingShape(ring_slots, n_envs, shape[0] // c, c, shape[1], shape[2]))
            self._ring = {name: t.numpy() for name, t in tensors.items()}
            self._counters = self._ring["counters"]
            self._player.send("ring", (tensors, c))
        except BaseException:
            self._finalizer()
            raise
        self._slots = ring_slots
        self._last: np.ndarray | None = None
        self._flat: torch.Tensor | None = None
        super().__init__(n_envs, obs_space, action_space)

    # -- process ---------------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """pid of the play process."""
        return self._player.pid

    # -- counters --------------------------------------------------------------------------------------
    @property
    def produced(self) -> int:
        """Vector steps the player has written since it started."""
        return int(self._counters[PRODUCED])

    @property
    def consumed(self) -> int:
        """Vector steps the trainer has taken from the ring."""
        return int(self._counters[CONSUMED])

    def allow(self, produced: int) -> None:
        """Let the player run until it has produced ``produced`` vector steps (the play-ahead bound)."""
        self._counters[ALLOWED] = produced
        self._trained.release()

    def start_play(self, params: dict[str, Any]) -> None:
        """Send the exploration state (and the first time the network) for one ``learn()``."""
        self._player.send("go", params)

    @property
    def network_shared(self) -> bool:
        """Whether the player has received its network (the first ``learn()`` sends it)."""
        return self._flat is not None

    def share_network(self, module: torch.nn.Module) -> dict[str, Any]:
        """The first-``learn()`` part of the play parameters: ``module`` serialised once (torch.save) and
        the shared weights buffer it will be refreshed from."""
        buf = io.BytesIO()
        torch.save(module, buf)
        self._flat = torch.zeros(weights_numel(module), dtype=torch.float32).share_memory_()
        self.publish_weights(module)
        return {"net": buf.getvalue(), "flat": self._flat}

    def publish_weights(self, module: torch.nn.Module) -> None:
        """Copy ``module``'s weights to the shared buffer; the player loads them before its next greedy
        step."""
        assert self._flat is not None, "share_network first"
        write_weights(module, self._flat, self._counters)

    def player_weights(self) -> torch.Tensor | None:
        """The weights the player acts with now, flat (diagnostics and tests)."""
        self._player.send("weights?")
        self._trained.release()
        return self._player.receive(60.0)

    # -- SB3 VecEnv ----------------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        self._counters[ALLOWED] = 0  # no more steps of the old episodes while the reset is on its way
        self._player.send("reset", seeds)
        self._trained.release()
        produced = self._player.receive(START_TIMEOUT)
        # steps played before the reset belong to the old episodes: drop them
        self._counters[CONSUMED] = produced
        self._counters[ALLOWED] = produced
        self._reset_seeds()
        self._reset_options()
        self._last = self._ring["first_obs"].copy()
        return self._last.copy()

    def recv_step(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """The next step the player took: ``(actions, obs, rewards, dones, infos)`` as an SB3 ``VecEnv.step``
        would return them for those actions (``terminal_observation``, ``TimeLimit.truncated``, true-score
        ``episode``). Waits for the player; raises :class:`PlayerDiedError` if it died."""
        assert self._last is not None, "reset() first"
        consumed = self.consumed
        while self.produced <= consumed:
            self._played.acquire(timeout=0.2)
            if self.produced <= consumed:
                self._player.raise_if_dead()
        r, c, slot = self._ring, self._c, consumed % self._slots
        dones = r["done"][slot].copy()
        new_obs = np.empty_like(self._last)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for e in range(self.num_envs):
            nxt = np.concatenate((self._last[e][c:], r["frame"][slot, e]))
            if dones[e]:
                infos[e]["terminal_observation"] = nxt
                infos[e]["TimeLimit.truncated"] = bool(r["truncated"][slot, e])
                new_obs[e] = r["reset_obs"][slot, e]
            else:
                new_obs[e] = nxt
            if r["episode"][slot, e]:
                infos[e]["episode"] = {
                    "r": float(r["ep_r"][slot, e]),
                    "l": int(r["ep_l"][slot, e]),
                    "t": float(r["ep_t"][slot, e]),
                }
        out = (r["action"][slot].copy(), new_obs, r["reward"][slot].copy(), dones, infos)
        self._counters[CONSUMED] = consumed + 1
        self._trained.release()
        self._last = new_obs
        return out

    def step_async(self, actions: np.ndarray) -> None:
        raise RuntimeError(
            "PlayProcessVecEnv cannot be stepped: its envs are played by the play process; "
            "train with parallel_play_class(DQN) (or use make_vec_env for a normal VecEnv)"
        )

    def step_wait(self) -> VecEnvStepReturn:
        raise RuntimeError("PlayProcessVecEnv cannot be stepped (see step_async)")

    def close(self) -> None:
        """Stop and join the play process (closing its envs). Idempotent."""
        if not self.closed:
            self.closed = True
            self._finalizer()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name == "render_mode":
            return [None for _ in self._get_indices(indices)]
        raise AttributeError(
            f"PlayProcessVecEnv does not expose {attr_name!r}: the envs live in the play process"
        )

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError("PlayProcessVecEnv cannot set env attributes: the envs live in the play process")

    def env_method(
        self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        raise AttributeError("PlayProcessVecEnv cannot call env methods: the envs live in the play process")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """``Monitor``: True, as the kit's launcher (true-score ``info["episode"]``)."""
        from stable_baselines3.common.monitor import Monitor

        wrapped = isinstance(wrapper_class, type) and issubclass(Monitor, wrapper_class)
        return [wrapped for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]


def make_play_env(
    env_id: str,
    n_envs: int = 1,
    seed: int | None = 0,
    backend: str = "auto",
    monitor_dir: str | None = None,
    **env_kwargs: Any,
) -> PlayProcessVecEnv:
    """Same arguments as ``make_vec_env``; the envs run in a separate play process."""
    return PlayProcessVecEnv(
        env_id, n_envs=n_envs, seed=seed, backend=backend, monitor_dir=monitor_dir, **env_kwargs
    )
