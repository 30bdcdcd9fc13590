"""CPU per frame of the kit's warp steps: OpenCV's INTER_AREA resize against the kit's exact kernel.

Frames: real Pong frames (random actions, ``ALE/Pong-v5`` with ``frameskip=1``), converted once to gray.
Each contender warps every frame ``--passes`` times in this thread; ``time.thread_time()`` per frame, the
median of ``--repeats`` measurements taken round-robin. Before timing, the kernel's output is checked equal
to ``cv2.resize``'s on every frame. Run by hand, never in CI::

    python benchmarks/warp_cost.py
    python benchmarks/warp_cost.py --frames 400 --repeats 7
"""

from __future__ import annotations

import argparse
import time

import cv2
import gymnasium as gym
import numpy as np


def pong_frames(count: int) -> list[np.ndarray]:
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=0)
    env.action_space.seed(0)
    frames = []
    for _ in range(count):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        frames.append(obs)
        if terminated or truncated:
            env.reset()
    env.close()
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--passes", type=int, default=5, help="passes over the frames per measurement")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from retro_atari_kit.wrappers.area_resize import load_kernel, resize_area_into

    load_kernel()
    rgb = pong_frames(args.frames)
    gray = [cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY) for frame in rgb]
    out = np.empty((84, 84), dtype=np.uint8)
    for frame in gray:
        resize_area_into(frame, out)
        if not np.array_equal(out, cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA)):
            raise SystemExit("the kernel differs from cv2.resize on a Pong frame: not timing it")

    contenders = {
        "cv2.cvtColor RGB2GRAY": (rgb, lambda f: cv2.cvtColor(f, cv2.COLOR_RGB2GRAY)),
        "cv2.resize INTER_AREA": (
            gray,
            lambda f: cv2.resize(f, (84, 84), dst=out, interpolation=cv2.INTER_AREA),
        ),
        "kit kernel (with its cv2.transpose)": (gray, lambda f: resize_area_into(f, out)),
        "cv2.transpose alone": (gray, cv2.transpose),
    }
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.repeats):
        for name, (frames, fn) in contenders.items():
            start = time.thread_time()
            for _ in range(args.passes):
                for frame in frames:
                    fn(frame)
            samples[name].append((time.thread_time() - start) / (args.passes * len(frames)) * 1e6)
    print(
        f"Pong frames 210x160 -> 84x84, {args.frames} frames x {args.passes} passes, median of {args.repeats}"
    )
    print("\n| step | CPU per frame |")
    print("|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {np.median(values):.1f} us |")
    cv2_us = np.median(samples["cv2.resize INTER_AREA"])
    kit_us = np.median(samples["kit kernel (with its cv2.transpose)"])
    print(f"\ncv2.resize / kit kernel: {cv2_us / kit_us:.2f}x")


if __name__ == "__main__":
    main()
