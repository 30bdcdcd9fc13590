"""A/B of the kit's vector env against the package at another git revision, EnvPool and raw ale-py.

``main_thread_cpu.py`` compares contenders that live in the current package; a change to the native
backend is judged against the same backend *before* the change. Each measurement here runs in its own
Python process (so two versions of ``retro_atari_kit`` never share one), the contenders alternated round
by round; ``--before REV`` checks ``REV`` out into a temporary git worktree whose ``retro_atari_kit`` that
process imports (the benchmark's own code, ``benchmarks/harness.py`` included, is this checkout's). Per
contender: calling-thread CPU and process CPU per env step, env steps/s, cores busy (process CPU x
throughput); ratios are medians of the per-round ratios; ``--out`` also writes the table to a file. Run by
hand, never in CI, on an otherwise idle machine::

    python benchmarks/native_ab.py --before HEAD~1 --sizes 4 8 --rounds 5
    python benchmarks/native_ab.py --before HEAD~1 --sizes 4 8 --rounds 5 --with envpool raw
    python benchmarks/native_ab.py --before HEAD~1 --path retro --sizes 4 8   # the worker processes' paths
    python benchmarks/native_ab.py --before HEAD~1 --path shards --sizes 4 8

``--path`` picks the kit's path: ``native`` (``gym.make_vec("RetroKit/Pong-v0")``, its default backend),
``shards`` (the same over two worker processes, ``shards=2``) or ``retro`` (``RetroKit/Pong-Atari2600-v0``:
stable-retro, one worker process per env); process CPU counts the workers too.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BEFORE = "RETROKIT_AB_PACKAGE"  # the child's environment: a folder holding only the retro_atari_kit measured

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if os.environ.get(BEFORE):
    # before the repository root, here and in the kit's worker processes (which re-import this script): the
    # folder has nothing but the other revision's package, so `benchmarks` still comes from this checkout
    sys.path.insert(0, os.environ[BEFORE])
from benchmarks import harness  # noqa: E402

PATHS = ("native", "shards", "retro")


def child(contender: str, n: int, steps: int, path: str = "native") -> None:
    """In a child process: print ``main_thread_cpu.measure``'s calling-thread and process CPU us per env step,
    env steps/s, and the file of the ``retro_atari_kit`` measured (the one in ``$RETROKIT_AB_PACKAGE`` if set,
    else this checkout's)."""
    from benchmarks.main_thread_cpu import (
        envpool_pong,
        kit_native,
        kit_native_shards,
        kit_retro,
        measure,
        raw_ale,
    )

    kit = {"native": kit_native, "shards": kit_native_shards(2), "retro": kit_retro()}[path]
    factory = {"kit": kit, "envpool": envpool_pong, "raw": raw_ale}[contender]
    figures = measure(factory, n, steps)
    package = sys.modules.get("retro_atari_kit")
    print(*figures, package.__file__ if package is not None else "-")


def run(contender: str, n: int, steps: int, before: str | None, path: str) -> tuple[float, float, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop(BEFORE, None)
    if contender == "kit before":
        env[BEFORE] = before
    name = "kit" if contender.startswith("kit") else contender
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", name, str(n), str(steps), path],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"{contender} at N={n} failed:\n{done.stderr}")
    out = done.stdout.split()
    if contender == "kit before" and not out[3].startswith(os.path.join(before, "")):
        raise RuntimeError(f"'kit before' measured {out[3]}, not the checkout in {before}")
    return float(out[0]), float(out[1]), float(out[2])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 5 and argv[0] == "--child":
        child(argv[1], int(argv[2]), int(argv[3]), argv[4])
        return
    parser = harness.parser(__doc__)
    harness.add_common_options(parser, rounds=5, quick="N = 2, 200 env steps, one round")
    parser.add_argument("--before", metavar="REV", help="git revision of the package to compare with")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--env-steps", type=int, default=4000, help="env steps per measurement (all N envs)")
    parser.add_argument("--path", choices=PATHS, default="native", help="the kit's path measured")
    parser.add_argument("--with", dest="others", nargs="*", default=[], choices=["envpool", "raw"])
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.env_steps, args.rounds = [2], 200, 1
    contenders = ["kit"] + (["kit before"] if args.before else []) + args.others
    worktree = package = None
    if args.before:
        worktree = tempfile.mkdtemp(prefix="retrokit-ab-")
        root = str(harness.ROOT)
        subprocess.run(["git", "worktree", "add", "--detach", worktree, args.before], cwd=root, check=True)
        package = tempfile.mkdtemp(prefix="retrokit-ab-package-")  # its retro_atari_kit alone (see BEFORE)
        os.symlink(os.path.join(worktree, "retro_atari_kit"), os.path.join(package, "retro_atari_kit"))
    try:
        print(f"load average {harness.load_average()}; before = {args.before}; path = {args.path}")
        samples = harness.Samples()  # (calling-thread us, process us, env steps/s) per (contender, N)
        for n in args.sizes:
            steps = max(args.env_steps // n, 100)
            cells = {
                (c, n): (lambda c=c, n=n, steps=steps: run(c, n, steps, package, args.path))
                for c in contenders
            }
            harness.alternate(
                cells,
                args.rounds,
                samples=samples,
                show=lambda key, v: f"N={key[1]} {key[0]}: {v[2]:,.0f} env steps/s",
            )
        report = harness.Report()
        report.add(f"## A/B, {args.path} path (median of {args.rounds} rounds; before = {args.before})", "")
        rows = []
        for n in args.sizes:
            for c in contenders:
                key = (c, n)
                busy = statistics.median(p * f / 1e6 for _, p, f in samples.values[key].values())
                rows.append(
                    [
                        n,
                        c,
                        f"{samples.median(key, 0):.1f}",
                        f"{samples.median(key, 1):.0f}",
                        harness.num(samples.median(key, 2)),
                        f"{busy:.2f}",
                        "" if c == "kit" else harness.ratio(samples.median_ratio(("kit", n), key, 2), 3),
                        "" if c == "kit" else harness.each(samples.ratios(("kit", n), key, 2), 2),
                    ]
                )
        report.table(
            [
                "N",
                "contender",
                "calling thread, us per env step",
                "process, us per env step",
                "env steps/s",
                "cores busy",
                "kit / it, env steps/s",
                "per round",
            ],
            rows,
        )
        report.write(args.out)
    finally:
        if worktree:
            subprocess.run(["git", "worktree", "remove", "--force", worktree], cwd=harness.ROOT, check=False)
            shutil.rmtree(package, ignore_errors=True)  # the folder with the link, not what it points to


if __name__ == "__main__":
    main()
