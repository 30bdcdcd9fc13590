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

Contenders: ``gym.make_vec("RetroKit/Pong-v0", backend="native")`` (the kit's DeepMind stack, frames
equal to SB3's AtariWrapper), the same with ``cv2.resize`` instead of the kit's exact resize kernel,
raw ``AtariVectorEnv("pong", N)`` (ale-py's own preprocessing) and EnvPool
``Pong-v5`` when installed; with ``--retro`` also ``RetroKit/Pong-Atari2600-v0`` (stable-retro in one
worker process per env, its warp done there; process CPU then counts only the calling process). Prints
the medians of ``--repeats`` (the contenders interleaved) and the wall-clock env steps/s of the same loops.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import gymnasium as gym
import numpy as np


def kit_native(n: int):
    import retro_atari_kit  # noqa: F401

    return gym.make_vec("RetroKit/Pong-v0", num_envs=n, backend="native")


def kit_native_cv2_resize(n: int):
    """The kit's native backend with OpenCV's own resize instead of the kit's exact kernel."""
    from retro_atari_kit.wrappers.area_resize import unload_kernel

    env = kit_native(n)
    unload_kernel()  # the next kit_native env loads it again (numba's cache, outside the timed loop)
    return env


class _Floor:
    """What the native backend cannot do without: its N single-env ``AtariVectorEnv`` cores stepped with
    the kit's settings (max-pooled 210x160 RGB frames), every action sent before any step is received,
    and, with ``warp``, each frame warped (gray, exact resize) in the calling thread. No stacking, no
    rules, no threads of the kit: the floor under the kit's process CPU."""

    def __init__(self, n: int, warp: bool):
        import cv2

        from retro_atari_kit.envs.ale import validate_ale_kwargs
        from retro_atari_kit.vector.native_ale import _make_core
        from retro_atari_kit.wrappers.area_resize import load_kernel, resize_area_into

        load_kernel()
        self.cores = [_make_core("pong", validate_ale_kwargs("Pong", {})) for _ in range(n)]
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


def kit_retro(n: int):
    import retro_atari_kit  # noqa: F401

    # stable-retro: one env per worker process, each warping its own frames; the calling thread stacks
    return gym.make_vec("RetroKit/Pong-Atari2600-v0", num_envs=n)


def raw_ale(n: int):
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv("pong", n)


def envpool_pong(n: int):
    import envpool

    return envpool.make_gymnasium("Pong-v5", num_envs=n, batch_size=n, seed=0)


def measure(factory: Callable[[int], gym.vector.VectorEnv], n: int, steps: int, warmup: int = 50):
    """(calling-thread CPU us per env step, whole-process CPU us per env step, wall env steps/s) over
    ``steps`` vector steps. Process CPU counts every thread: emulation, warp, the calling thread."""
    env = factory(n)
    try:
        actions = np.random.default_rng(0).integers(0, env.single_action_space.n, size=(steps + warmup, n))
        with warnings.catch_warnings():  # EnvPool takes its seed at creation and warns about this one
            warnings.simplefilter("ignore", UserWarning)
            env.reset(seed=0)
        for t in range(warmup):
            env.step(actions[t])
        cpu = 0.0
        start, process_start = time.perf_counter(), time.process_time()
        for t in range(warmup, warmup + steps):
            before = time.thread_time()
            env.step(actions[t])
            cpu += time.thread_time() - before
        process = time.process_time() - process_start
        wall = time.perf_counter() - start
        return cpu / (steps * n) * 1e6, process / (steps * n) * 1e6, steps * n / wall
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--env-steps", type=int, default=8000, help="env steps per measurement (all N envs)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also the native backend's floor: its ale-py cores' RGB frames alone, and with the warp",
    )
    parser.add_argument(
        "--retro", action="store_true", help="also the kit's stable-retro Pong (shared-memory subprocesses)"
    )
    args = parser.parse_args()
    contenders = {"kit native": kit_native, "kit native, cv2.resize": kit_native_cv2_resize}
    if args.floor:
        contenders["floor: RGB frames"] = kit_floor_frames
        contenders["floor: RGB frames + warp"] = kit_floor_warped
    contenders["raw AtariVectorEnv"] = raw_ale
    if args.retro:
        contenders["kit retro subprocess"] = kit_retro
    try:
        import envpool  # noqa: F401

        contenders["EnvPool"] = envpool_pong
    except ImportError:
        print("EnvPool not installed: skipped (pip install envpool)")
    print(f"Pong, random actions, {args.env_steps} env steps per measurement, median of {args.repeats}")
    rows = []
    for n in args.sizes:
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in contenders}
        for _ in range(args.repeats):
            for name, factory in contenders.items():
                samples[name].append(measure(factory, n, max(args.env_steps // n, 100)))
        for name in contenders:
            cpu, process, fps = (float(np.median([s[k] for s in samples[name]])) for k in range(3))
            rows.append((name, n, cpu, process, fps))
            each = ", ".join(f"{s[0]:.1f}" for s in samples[name])
            print(
                f"  N={n:<3d} {name:24s} {cpu:6.1f} us/env step ({each}); process {process:4.0f} us; "
                f"{fps:6.0f} env steps/s",
                flush=True,
            )
    print("\n| contender | N | calling thread, us per env step | process, us per env step | env steps/s |")
    print("|---|---|---|---|---|")
    for name, n, cpu, process, fps in rows:
        print(f"| {name} | {n} | {cpu:.1f} | {process:.0f} | {fps:,.0f} |")


if __name__ == "__main__":
    main()
