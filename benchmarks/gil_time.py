"""GIL-held time per env step: how much of a vector step needs the interpreter, for the kit and its peers.

Work done with the GIL released runs on every core at once; work done holding it runs on one core at a time,
whatever the machine. So the GIL-held time per env step bounds what a backend can reach on many cores
(1 / that time), where CPU per env step does not. This samples a child process stepping each contender with
random actions under ``py-spy record --gil`` (py-spy keeps a sample only when some thread holds the GIL),
counts the samples taken inside the step loop (the calling thread's) and those of the backend's own Python
threads (the kit's warp threads; their warm-up steps included, their one-off kernel compilation excluded),
and divides their time by the env steps taken. Run by hand, never in
CI (needs ``pip install py-spy`` and permission to trace a child process)::

    python benchmarks/gil_time.py --sizes 8              # kit native, raw ale-py, EnvPool
    python benchmarks/gil_time.py --sizes 8 32 --seconds 8 --rate 2000

Figures are sampled: at ``--rate`` samples/s, a contender held the GIL for ``samples / rate`` seconds of its
step loop. py-spy's own pauses are avoided (``--nonblocking``); repeat a few times on a shared machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402

LOOP_MARK = "_timed_loop"  # the function whose samples count

CHILD = r"""
import sys, time
import numpy as np
sys.path.insert(0, {root!r})
from benchmarks import vec_throughput as vb

def make(name, n):
    if name == "kit native":
        return vb.kit("native", shards=1)(n)
    if name == "raw AtariVectorEnv":
        return vb.raw_ale(n)
    if name == "EnvPool":
        return vb.envpool_pong(n)
    raise SystemExit("unknown contender " + name)

def _timed_loop(runner, actions, seconds):
    steps, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        runner.step(actions[steps % len(actions)])
        steps += 1
    return steps

name, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
runner = make(name, n)
actions = np.random.default_rng(0).integers(0, runner.n_actions, size=(1000, n))
runner.reset()
for t in range(50):
    runner.step(actions[t])
start = time.perf_counter()
steps = _timed_loop(runner, actions, seconds)
print("STEPS", steps * n, time.perf_counter() - start, flush=True)
runner.close()
"""

CONTENDERS = ("kit native", "raw AtariVectorEnv", "EnvPool")


def gil_time(name: str, n: int, seconds: float, rate: int) -> tuple[float, float]:
    """(GIL-held µs per env step, env steps/s while sampled) of one contender."""
    with tempfile.TemporaryDirectory() as folder:
        script, raw = os.path.join(folder, "child.py"), os.path.join(folder, "samples.txt")
        with open(script, "w") as f:
            f.write(CHILD.format(root=str(harness.ROOT)))
        command = ["py-spy", "record", "--gil", "--nonblocking", "--rate", str(rate), "--format", "raw"]
        proc = subprocess.run(
            [*command, "--output", raw, "--", sys.executable, script, name, str(n), str(seconds)],
            capture_output=True,
            text=True,
        )
        steps_line = [line for line in proc.stdout.splitlines() if line.startswith("STEPS")]
        if proc.returncode != 0 or not steps_line:
            raise RuntimeError(f"{name}: the sampled child failed: {(proc.stderr or proc.stdout)[-800:]}")
        _, env_steps, wall = steps_line[0].split()
        samples = 0
        with open(raw) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if LOOP_MARK in stack or (stack.startswith("Thread._bootstrap") and "_compile" not in stack):
                    samples += int(count)
    return samples / rate / int(env_steps) * 1e6, int(env_steps) / float(wall)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    harness.add_common_options(
        parser, rounds=1, quick="N = 2, one sampled second, the kit's native backend only"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[8])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each sampled step loop")
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--only", nargs="+", help="contenders whose name contains one of these words")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.seconds, args.rounds, args.only = [2], 1.0, 1, ["kit native"]
    if shutil.which("py-spy") is None:
        raise SystemExit("gil_time.py needs py-spy: pip install py-spy")
    names = [c for c in CONTENDERS if not args.only or any(word in c for word in args.only)]
    cells = {
        (name, n): (lambda name=name, n=n: gil_time(name, n, args.seconds, args.rate))
        for n in args.sizes
        for name in names
    }
    samples = harness.alternate(
        cells,
        args.rounds,
        catch=True,
        show=lambda key, v: f"N={key[1]} {key[0]}: {v[0]:.1f} us held per env step",
    )
    report = harness.Report()
    report.add(
        f"## GIL held per env step (py-spy at {args.rate}/s, {args.seconds:g} s loops, "
        f"median of {samples.rounds} rounds)",
        "",
    )
    rows = []
    for name, n in cells:
        if (name, n) in samples.errors:
            rows.append([name, n, f"failed: {str(samples.errors[(name, n)]).splitlines()[-1][:80]}", ""])
        else:
            rows.append(
                [name, n, f"{samples.median((name, n), 0):.1f}", harness.num(samples.median((name, n), 1))]
            )
    report.table(["contender", "N", "GIL held, µs per env step", "env steps/s while sampled"], rows)
    report.write(args.out)


if __name__ == "__main__":
    main()
