"""Calling-thread CPU per env step: the kit's native ALE backend against raw ale-py and EnvPool.

Whatever a vector env does in the calling thread does not overlap with anything else the training loop
does, and what runs under the GIL does not scale with cores; the emulator threads (and the kit's warp
threads) do. This measures ``time.thread_time()`` (CPU time of the calling thread only) around
``env.step`` with random actions on Pong, divided by the env steps taken (N envs x vector steps), and
``time.process_time()`` over the same loop (every thread: emulation, warp, calling thread). Run by hand,
never in CI::

    python benchmarks/main_thread_cpu.py                 # N in 1, 4, 8, 16
    python benchmarks/main_thread_cpu.py --sizes 8 --env-steps 4000 --repeats 5
    python benchmarks/main_thread_cpu.py --sizes 4 8 --retro   # with the stable-retro path
    python benchmarks/main_thread_cpu.py --sizes 8 --floor     # with what the native backend cannot avoid
    python benchmarks/main_thread_cpu.py --sizes 4 8 --async    # with EnvPool's async send/recv API
    python benchmarks/main_thread_cpu.py --sizes 2 4 8 --only retro --retro Pong-Atari2600 Airstriker-Genesis

Contenders: ``gym.make_vec("RetroKit/Pong-v0", backend="native")`` (the kit's DeepMind stack, frames
equal to SB3's AtariWrapper; its default ``shards``), the same with every env in this process
(``shards=1``; ``--shards S``: over S worker processes), the same in one process with ``cv2.resize``
instead of the kit's exact resize kernel,
raw ``AtariVectorEnv("pong", N)`` (ale-py's own preprocessing) and EnvPool
``Pong-v5`` when installed; with ``--retro`` also ``RetroKit/Pong-Atari2600-v0`` (stable-retro in one
worker process per env, its warp done there; process CPU counts those workers too), for each
game given to ``--retro``, with SB3 ``SubprocVecEnv`` + ``VecFrameStack(4)`` over the same per-env stack
(the kit's, built with ``frame_stack=1`` as the kit's workers build it); ``native_ab.py --path retro``
compares that path with another git revision's. Prints the medians of ``--rounds`` (the contenders
alternated in each round, ``benchmarks/harness.py``), the wall-clock env steps/s of the same loops, cores
busy (process CPU / wall) and medians of per-round ratios; ``--out`` also writes the tables to a file.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness, vec_throughput  # noqa: E402  (vec_throughput: the async runners)


def kit_native(n: int):
    import retro_atari_kit  # noqa: F401

    return gym.make_vec("RetroKit/Pong-v0", num_envs=n, backend="native")


def kit_native_cv2_resize(n: int):
    """The kit's native backend in this process with OpenCV's own resize instead of the kit's exact kernel
    (in this process: worker processes would load the kernel themselves)."""
    from retro_atari_kit.wrappers.area_resize import unload_kernel

    env = kit_native_one_process(n)
    unload_kernel()  # the next kit_native env loads it again (numba's cache, outside the timed loop)
    return env


def kit_native_one_process(n: int):
    """The kit's native backend with all envs in this process (``shards=1``: its emulator threads)."""
    import retro_atari_kit  # noqa: F401

    return gym.make_vec("RetroKit/Pong-v0", num_envs=n, backend="native", shards=1)


def kit_native_shards(shards: int) -> Callable[[int], gym.vector.VectorEnv]:
    """The kit's native backend over ``shards`` worker processes (or all of them, one per env, if fewer)."""
    import retro_atari_kit  # noqa: F401

    return lambda n: gym.make_vec("RetroKit/Pong-v0", num_envs=n, backend="native", shards=min(shards, n))


class _Floor:
    """What the native backend cannot do without: its N single-env ``AtariVectorEnv`` cores stepped with
    the kit's settings (max-pooled 210x160 RGB frames), every action sent before any step is received,
    and, with ``warp``, each frame warped (gray, exact resize) in the calling thread. No stacking, no
    rules, no threads of the kit: the floor under the kit's process CPU."""

    def __init__(self, n: int, warp: bool):
        import cv2

        from retro_atari_kit.envs.ale import validate_ale_kwargs
        from retro_atari_kit.vector.native_ale import make_core
        from retro_atari_kit.wrappers.area_resize import load_kernel, resize_area_into

        load_kernel()
        self.cores = [make_core("pong", validate_ale_kwargs("Pong", {})) for _ in range(n)]
        self.single_action_space = gym.spaces.Discrete(6)
        self._paddle = np.ones(1, dtype=np.float32)
        self._out = np.empty((84, 84), dtype=np.uint8)
        self._warp = (
            (lambda rgb: resize_area_into(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), self._out)) if warp else None
        )

    def reset(self, seed: int = 0):
        for i, core in enumerate(self.cores):
            core.reset(seed=seed + i)

    def step(self, actions: np.ndarray):
        ales = [core.ale for core in self.cores]
        for i, ale in enumerate(ales):
            ale.send(actions[i : i + 1].astype(np.int64), self._paddle)
        for ale in ales:
            obs = ale.recv()[0]
            if self._warp is not None:
                self._warp(obs[0, 0])

    def close(self):
        for core in self.cores:
            core.close()


def kit_floor_frames(n: int):
    return _Floor(n, warp=False)


def kit_floor_warped(n: int):
    return _Floor(n, warp=True)


def kit_retro(game: str = "Pong-Atari2600") -> Callable[[int], gym.vector.VectorEnv]:
    def make(n: int):
        import retro_atari_kit  # noqa: F401

        # stable-retro: one env per worker process, each warping its own frames; the calling thread stacks
        return gym.make_vec(f"RetroKit/{game}-v0", num_envs=n)

    return make


class _SB3Runner:
    """An SB3 VecEnv behind the calls ``measure`` makes."""

    def __init__(self, venv):
        self.venv = venv
        self.single_action_space = venv.action_space

    def reset(self, seed: int = 0):
        self.venv.seed(seed)
        return self.venv.reset()

    def step(self, actions: np.ndarray):
        return self.venv.step(actions)

    def close(self):
        self.venv.close()


def sb3_retro(game: str) -> Callable[[int], _SB3Runner]:
    """SB3 ``SubprocVecEnv`` + ``VecFrameStack(4)`` over the kit's per-env stack (``frame_stack=1``)."""

    def make(n: int):
        from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

        from retro_atari_kit.vector._factory import EnvFactory

        return _SB3Runner(VecFrameStack(SubprocVecEnv([EnvFactory(game, "retro", {}) for _ in range(n)]), 4))

    return make


def raw_ale(n: int):
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv("pong", n)


def envpool_pong(n: int):
    import envpool

    return envpool.make_gymnasium("Pong-v5", num_envs=n, batch_size=n, seed=0)


def measure(factory: Callable[[int], gym.vector.VectorEnv], n: int, steps: int, warmup: int = 50):
    """(calling-thread CPU us per env step, whole-process CPU us per env step, wall env steps/s) over
    ``steps`` vector steps. Process CPU counts every thread (emulation, warp, the calling thread) and the
    env's worker processes (the sharded native backend's, stable-retro's): ``harness.CpuMeter``."""
    env = factory(n)
    try:
        actions = np.random.default_rng(0).integers(0, env.single_action_space.n, size=(steps + warmup, n))
        with warnings.catch_warnings():  # EnvPool takes its seed at creation and warns about this one
            warnings.simplefilter("ignore", UserWarning)
            env.reset(seed=0)
        for t in range(warmup):
            env.step(actions[t])
        cpu = 0.0
        with harness.CpuMeter(getattr(env, "worker_pids", None) or []) as meter:
            for t in range(warmup, warmup + steps):
                before = time.thread_time()
                env.step(actions[t])
                cpu += time.thread_time() - before
        usage = meter.usage
        return cpu / (steps * n) * 1e6, usage.cpu / (steps * n) * 1e6, steps * n / usage.wall
    finally:
        env.close()


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    harness.add_common_options(parser, quick="N = 2, 200 env steps, one round, the kit and raw ale-py only")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--env-steps", type=int, default=8000, help="env steps per measurement (all N envs)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also the native backend's floor: its ale-py cores' RGB frames alone, and with the warp",
    )
    parser.add_argument(
        "--retro",
        nargs="*",
        metavar="GAME",
        help="also stable-retro games (default Pong-Atari2600): the kit's shared-memory subprocesses and SB3 "
        "SubprocVecEnv over the same stack",
    )
    parser.add_argument(
        "--shards",
        type=int,
        nargs="+",
        metavar="S",
        help="also the native backend over S worker processes (its default: one per core, >= 2 envs each)",
    )
    parser.add_argument(
        "--async",
        dest="async_api",
        action="store_true",
        help="also EnvPool's async send/recv API, batches of N // 2 (two batches per step)",
    )
    parser.add_argument("--only", nargs="+", help="contenders whose name contains one of these words")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.env_steps, args.rounds = [2], 200, 1
        args.only = args.only or ["kit native", "raw"]
    contenders = {
        "kit native": kit_native,
        "kit native, one process": kit_native_one_process,
        "kit native, cv2.resize": kit_native_cv2_resize,
    }
    for shards in args.shards or []:
        contenders[f"kit native, {shards} shards"] = kit_native_shards(shards)
    if args.floor:
        contenders["floor: RGB frames"] = kit_floor_frames
        contenders["floor: RGB frames + warp"] = kit_floor_warped
    contenders["raw AtariVectorEnv"] = raw_ale
    try:
        import envpool  # noqa: F401

        contenders["EnvPool"] = envpool_pong
        if args.async_api:
            contenders["EnvPool, async"] = vec_throughput.envpool_async
    except ImportError:
        print("EnvPool not installed: skipped (pip install envpool)")
    if args.retro is not None:
        for game in args.retro or ["Pong-Atari2600"]:
            contenders[f"kit retro {game}"] = kit_retro(game)
            contenders[f"SB3 SubprocVecEnv retro {game}"] = sb3_retro(game)
    if args.only:
        words = [w.lower() for w in args.only]
        contenders = {name: f for name, f in contenders.items() if any(w in name.lower() for w in words)}
    print(
        f"random actions, {args.env_steps} env steps per measurement, median of {args.rounds} rounds; "
        f"load average {harness.load_average()}"
    )
    samples = harness.Samples()  # (calling-thread us, process us, env steps/s) per (contender, N)
    for n in args.sizes:
        steps = max(args.env_steps // n, 100)
        cells = {
            (name, n): (lambda f=f, n=n, steps=steps: measure(f, n, steps)) for name, f in contenders.items()
        }
        harness.alternate(
            cells,
            args.rounds,
            samples=samples,
            show=lambda key, v: (
                f"N={key[1]:<3d} {key[0]:44s} {v[0]:6.1f} us/env step; process {v[1]:4.0f} us; "
                f"{v[2]:6.0f} env steps/s"
            ),
        )
    report = harness.Report()
    rows = []
    for n in args.sizes:
        for name in contenders:
            cpu, process, fps = (samples.median((name, n), k) for k in range(3))
            # cores busy = process CPU per env step x env steps/s, in each round, then the median
            busy = statistics.median(p * f / 1e6 for _, p, f in samples.values[(name, n)].values())
            rows.append([name, n, f"{cpu:.1f}", f"{process:.0f}", harness.num(fps), f"{busy:.2f}"])
    report.table(
        [
            "contender",
            "N",
            "calling thread, us per env step",
            "process, us per env step",
            "env steps/s",
            "cores busy",
        ],
        rows,
    )
    others = ("EnvPool", "raw AtariVectorEnv", "kit native, one process")
    rows = [
        [n, other, harness.ratio(samples.median_ratio(("kit native", n), (other, n), 2))]
        for n in args.sizes
        for other in others
        if "kit native" in contenders and other in contenders
    ]
    if rows:
        report.table(
            ["N", "kit native against", "env steps/s, kit / other (median of per-round ratios)"], rows
        )
    rows = []
    for game in args.retro or []:
        kit = f"kit retro {game}"
        for n in args.sizes:
            other = f"SB3 SubprocVecEnv retro {game}"
            if kit in contenders and other in contenders:
                rows.append(
                    [
                        game,
                        n,
                        other,
                        harness.ratio(samples.median_ratio((kit, n), (other, n), 0)),
                        harness.ratio(samples.median_ratio((kit, n), (other, n), 2)),
                    ]
                )
    if rows:
        report.table(
            ["game", "N", "kit against", "calling-thread CPU, kit / other", "env steps/s, kit / other"], rows
        )
    report.write(args.out)


if __name__ == "__main__":
    main()
