"""The play process: steps the envs with an epsilon-greedy copy of the Q-network and writes the ring.

It runs :func:`main` in a ``spawn``-ed child of the kit's child-process host
(:class:`retro_atari_kit.processes.ChildProcess`). Commands on the pipe (trainer -> player), each a
``(command, data)`` pair; the player's answers are the host's ``reply``:

- after the player's first answer ``(obs_space, act_space)``: ``("ring", (tensors, frame_channels))`` once;
- ``("reset", seeds)`` -> the envs are (re)seeded and reset, ``first_obs`` written; answer: ``produced``;
- ``("go", params)`` at the start of every ``learn()``: exploration state and, the first time, the network,
  the shared weights buffer and the RNG states (see ``ParallelPlayMixin._setup_learn``);
- ``("weights?", None)`` -> load the newest published weights; answer: a flat copy (diagnostics);
- ``("close", None)`` -> close the envs and exit.

On any error the host sends the trainer the error as one line and the player exits with code 1. Like every
child of the host it ignores SIGINT, SIGTERM and SIGHUP, even when they reach the whole process group (a stop
is the trainer's to handle: it saves a checkpoint and then closes the player); it also dies with its
parent (Linux ``PR_SET_PDEATHSIG``, plus a parent-pid check while waiting), so it never outlives the
trainer.

Actions are chosen exactly as SB3's ``OffPolicyAlgorithm._sample_action`` and ``DQN.predict`` /
``QRDQN.predict`` choose them: uniform random actions (``action_space.sample()`` per env) before
``learning_starts``; after it one ``np.random.rand()`` per vector step against epsilon, then random actions
or the network's arg-max.
Epsilon follows the same schedule of the same ``num_timesteps``. With the trainer's RNG states, the same env
seeds and the same weights, the player therefore takes the actions the synchronous loop would take.
"""

from __future__ import annotations

import ctypes
import io
import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from retro_atari_kit.processes import reply

from .ring import ALLOWED, CONSUMED, PRODUCED, read_weights


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # the parent-pid check in the wait loop still applies


class _Player:
    def __init__(self, conn: Connection, semaphores: tuple[Any, Any], env_args: dict[str, Any], parent: int):
        import torch
        from retro_atari_kit.integrations.sb3.launcher import make_vec_env

        torch.set_num_threads(1)  # one core for play; the trainer's threads get the rest
        self.torch = torch
        self.conn, (self.played, self.trained), self.parent = conn, semaphores, parent
        self.env = make_vec_env(**env_args)
        self.n = self.env.num_envs
        self.last: np.ndarray | None = None
        self.go: dict[str, Any] | None = None
        self.net: Any = None
        self.flat: Any = None
        self.version = -1
        self.action_space: Any = None

    # -- protocol --------------------------------------------------------------------------------------
    def setup(self) -> None:
        reply(self.conn, (self.env.observation_space, self.env.action_space))
        command, data = self.conn.recv()
        if command == "close":
            raise SystemExit(0)
        tensors, self.c = data
        self.tensors = tensors
        self.ring = {name: t.numpy() for name, t in tensors.items()}
        self.counters = self.ring["counters"]
        self.slots = self.ring["frame"].shape[0]

    def handle(self, command: str, data: Any) -> bool:
        """Process one command; False on ``close``."""
        if command == "close":
            return False
        if command == "reset":
            if data is not None:
                self.env._seeds = list(data)  # the seeds SB3 gave the trainer's VecEnv, env by env
            self.last = self.env.reset()
            self.ring["first_obs"][:] = self.last
            reply(self.conn, int(self.counters[PRODUCED]))
        elif command == "go":
            self._start(data)
        elif command == "weights?":
            if self.net is not None:
                self.version = read_weights(self.net, self.flat, self.counters, self.version)
            reply(self.conn, None if self.flat is None else self.flat.clone())
        else:
            raise RuntimeError(f"unknown command {command!r}")
        return True

    def _start(self, params: dict[str, Any]) -> None:
        torch = self.torch
        if "net" in params:  # the first learn(): network, weights buffer and the trainer's RNG states
            self.net = torch.load(io.BytesIO(params["net"]), map_location="cpu", weights_only=False)
            self.net.set_training_mode(False)
            self.flat = params["flat"]
            np.random.set_state(params["np_random"])
            self.action_space = params["action_space"]
        self.go = params

    # -- the loop ----------------------------------------------------------------------------------------
    def run(self) -> None:
        self.setup()
        while True:
            if self.conn.poll():
                if not self.handle(*self.conn.recv()):
                    return
                continue
            produced = int(self.counters[PRODUCED])
            if (
                self.go is None
                or self.last is None
                or produced >= int(self.counters[ALLOWED])
                or produced - int(self.counters[CONSUMED]) >= self.slots
            ):
                self.trained.acquire(timeout=0.2)  # woken by the trainer's consume / allow / commands
                if os.getppid() != self.parent:
                    raise SystemExit(0)
                continue
            self.step(produced)

    def step(self, produced: int) -> None:
        go = self.go
        assert go is not None and self.last is not None
        timesteps = go["timesteps"] + self.n * (produced - go["produced"])
        if timesteps < go["learning_starts"]:
            actions = np.array([self.action_space.sample() for _ in range(self.n)])
        else:
            eps = go["eps"] if produced == go["produced"] else go["schedule"](1.0 - timesteps / go["total"])
            if np.random.rand() < eps:
                actions = np.array([self.action_space.sample() for _ in range(self.n)])
            else:
                actions = self.greedy(self.last)
        new_obs, rewards, dones, infos = self.env.step(actions)
        slot = produced % self.slots
        r, c = self.ring, self.c
        for e in range(self.n):
            nxt = infos[e]["terminal_observation"] if dones[e] else new_obs[e]
            if not np.array_equal(nxt[:-c], self.last[e][c:]):
                raise RuntimeError(
                    f"env {e}: observations are not frame stacks that continue one another "
                    f"({c} channel(s) per frame); parallel play needs the kit's frame stack"
                )
            r["frame"][slot, e] = nxt[-c:]
            if dones[e]:
                r["reset_obs"][slot, e] = new_obs[e]
            r["truncated"][slot, e] = bool(infos[e].get("TimeLimit.truncated", False))
            episode = infos[e].get("episode")
            r["episode"][slot, e] = episode is not None
            if episode is not None:
                r["ep_r"][slot, e] = episode["r"]
                r["ep_l"][slot, e] = episode["l"]
                r["ep_t"][slot, e] = episode["t"]
        r["action"][slot] = actions
        r["reward"][slot] = rewards
        r["done"][slot] = dones
        self.last = new_obs
        self.counters[PRODUCED] = produced + 1  # the slot is complete: publish it
        self.played.release()

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        torch = self.torch
        self.version = read_weights(self.net, self.flat, self.counters, self.version)
        with torch.no_grad():
            actions = self.net._predict(torch.as_tensor(obs), deterministic=True)
        return actions.numpy().reshape((-1, *self.action_space.shape))

    def close(self) -> None:
        self.env.close()


def main(conn: Connection, semaphores: tuple[Any, Any], env_args: dict[str, Any], parent: int) -> None:
    """Entry point of the play process (see the module docstring); its errors reach the trainer through the
    child-process host."""
    _die_with_parent()
    import retro_atari_kit  # noqa: F401  (a spawned process must register the RetroKit/ IDs itself)

    player = _Player(conn, semaphores, env_args, parent)
    try:
        player.run()
    finally:
        player.close()
