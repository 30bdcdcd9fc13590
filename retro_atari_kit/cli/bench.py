"""``retrokit bench ENV_ID``: env steps/s (random actions) per vector backend."""

from __future__ import annotations

import argparse
import time

from retro_atari_kit.cli._common import CliError, user_errors
from retro_atari_kit.cli.arguments import positive_int


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="env steps/s per vector backend (random actions)")
    p.add_argument("env_id")
    p.add_argument("--n-envs", type=positive_int, nargs="+", default=[4], metavar="N")
    p.add_argument(
        "--backends",
        nargs="+",
        default=None,
        metavar="NAME",
        help="backends to compare (default: every vector backend; 'dummy' = gymnasium "
        "SyncVectorEnv over gym.make envs)",
    )
    p.add_argument("--steps", type=positive_int, default=2000, help="vector steps per measurement")
    p.set_defaults(func=run)


def known_backends() -> list[str]:
    """The vector backends to compare (``auto`` is one of them, so it is not repeated)."""
    from retro_atari_kit.vector import BACKENDS

    return [b for b in BACKENDS if b != "auto"]


def measure(env_id: str, backend: str, n_envs: int, steps: int) -> float:
    """Agent steps per second (all envs) with uniformly random actions, after a short warm-up."""
    import gymnasium as gym
    import numpy as np

    if backend == "dummy":  # one env after the other in this process, the usual hand-rolled baseline
        venv = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * n_envs)
    else:
        venv = gym.make_vec(env_id, num_envs=n_envs, backend=backend)
    try:
        venv.reset(seed=0)
        rng = np.random.default_rng(0)
        n_actions = venv.single_action_space.n
        for _ in range(50):
            venv.step(rng.integers(0, n_actions, size=n_envs))
        t0 = time.perf_counter()
        for _ in range(steps):
            venv.step(rng.integers(0, n_actions, size=n_envs))
        return steps * n_envs / (time.perf_counter() - t0)
    finally:
        venv.close()


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.registration import probe_env

    with user_errors():
        probe_env(args.env_id, {})
    backends = args.backends or known_backends()
    known = known_backends() + ["dummy", "auto"]
    bad = [b for b in backends if b not in known]
    if bad:
        raise CliError(f"unknown backend {bad[0]!r}; choose from {', '.join(sorted(set(known)))}")
    print(f"{args.env_id}: random actions, {args.steps} vector steps per measurement")
    for n in args.n_envs:
        for b in backends:
            try:
                sps = measure(args.env_id, b, n, args.steps)
            except ValueError as exc:  # backend not usable for this env / kwargs
                print(f"  backend {b:<12} n_envs {n:<3} unavailable: {str(exc).splitlines()[0]}")
                continue
            print(f"  backend {b:<12} n_envs {n:<3} {sps:>9.0f} steps/s")
    return 0
