"""A/B of the kit's native ALE backend against the package at another git revision, EnvPool and raw ale-py.

``main_thread_cpu.py`` compares contenders that live in the current package; a change to the native
backend is judged against the same backend *before* the change. Each measurement here runs in its own
Python process (so two versions of ``retro_atari_kit`` never share one), the contenders alternated round
by round; ``--before REV`` checks ``REV`` out into a temporary git worktree and puts it first on that
process's ``sys.path``. Per contender: calling-thread CPU and process CPU per env step, env steps/s,
cores busy (process CPU x throughput); ratios are medians of the per-round ratios. Run by hand, never in
CI, on an otherwise idle machine::

    python benchmarks/native_ab.py --before HEAD~1 --sizes 4 8 --rounds 5
    python benchmarks/native_ab.py --before HEAD~1 --sizes 4 8 --rounds 5 --with envpool raw
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(contender: str, n: int, steps: int) -> None:
    """In a child process: print ``main_thread_cpu.measure``'s calling-thread and process CPU us per env step
    and env steps/s for one contender (the kit from whichever ``retro_atari_kit`` is first on sys.path)."""
    from main_thread_cpu import envpool_pong, kit_native, measure, raw_ale

    factory = {"kit": kit_native, "envpool": envpool_pong, "raw": raw_ale}[contender]
    print(*measure(factory, n, steps))


def run(contender: str, n: int, steps: int, before: str | None) -> tuple[float, float, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if contender == "kit before":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (before, env.get("PYTHONPATH")) if p)
    name = "kit" if contender.startswith("kit") else contender
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, str(n), str(steps)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: its package would come first on sys.path
        check=True,
    ).stdout.split()
    return float(out[0]), float(out[1]), float(out[2])


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", metavar="REV", help="git revision of the package to compare with")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--env-steps", type=int, default=4000, help="env steps per measurement (all N envs)")
    parser.add_argument("--with", dest="others", nargs="*", default=[], choices=["envpool", "raw"])
    args = parser.parse_args()
    contenders = ["kit"] + (["kit before"] if args.before else []) + args.others
    worktree = None
    if args.before:
        worktree = tempfile.mkdtemp(prefix="retrokit-ab-")
        subprocess.run(["git", "worktree", "add", "--detach", worktree, args.before], cwd=ROOT, check=True)
    try:
        print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}; before = {args.before}")
        for n in args.sizes:
            samples = {c: [] for c in contenders}
            for _ in range(args.rounds):
                for c in contenders:
                    samples[c].append(run(c, n, max(args.env_steps // n, 100), worktree))
            for c in contenders:
                a = np.array(samples[c])
                busy = np.median(a[:, 1] * a[:, 2] / 1e6)
                print(
                    f"N={n:<3d} {c:11s} calling thread {np.median(a[:, 0]):5.1f} us/env step, process "
                    f"{np.median(a[:, 1]):4.0f} us, {np.median(a[:, 2]):6.0f} env steps/s, "
                    f"{busy:.2f} cores busy"
                )
            for c in contenders[1:]:
                ratios = [x[2] / y[2] for x, y in zip(samples["kit"], samples[c], strict=True)]
                each = ", ".join(f"{r:.2f}" for r in ratios)
                print(f"N={n:<3d} kit / {c}: {np.median(ratios):.3f}x env steps/s ({each})")
    finally:
        if worktree:
            subprocess.run(["git", "worktree", "remove", "--force", worktree], cwd=ROOT, check=False)


if __name__ == "__main__":
    main()
