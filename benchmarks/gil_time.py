"""GIL-held time per env step: how much of a vector step needs the interpreter, for the kit and its peers.

Work done with the GIL released runs on every core at once; work done holding it runs on one core at a time,
whatever the machine. So the GIL-held time per env step bounds what a backend can reach on many cores
(1 / that time), where CPU per env step does not. This samples a child process stepping each contender with
random actions under ``py-spy record --gil`` (py-spy keeps a sample only when some thread holds the GIL),
counts the samples taken inside the step loop (the calling thread's) and those of the backend's own Python
threads (the kit's warp threads; their warm-up steps included, their one-off kernel compilation excluded),
and divides their time by the env steps taken. Run by hand, never in
CI (needs ``pip install py-spy`` and permission to trace a child process)::

    python benchmarks/gil_time.py --sizes 8              # kit native (sync, async), raw ale-py, EnvPool
    python benchmarks/gil_time.py --sizes 8 32 --seconds 8 --rate 2000

Figures are sampled: at ``--rate`` samples/s, a contender held the GIL for ``samples / rate`` seconds of its
step loop. py-spy's own pauses are avoided (``--nonblocking``); repeat a few times on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

LOOP_MARK = "_timed_loop"  # the function whose samples count

CHILD = r"""
import sys, time
import numpy as np
sys.path.insert(0, {bench!r})
import vec_throughput as vb

def make(name, n):
    if name == "kit native":
        return vb.kit("native", shards=1)(n)
    if name == "kit native, async":
        return vb.kit_async(n)
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

CONTENDERS = ("kit native", "kit native, async", "raw AtariVectorEnv", "EnvPool")


def gil_time(name: str, n: int, seconds: float, rate: int) -> tuple[float, float]:
    """(GIL-held µs per env step, env steps/s while sampled) of one contender."""
    with tempfile.TemporaryDirectory() as folder:
        script, raw = os.path.join(folder, "child.py"), os.path.join(folder, "samples.txt")
        with open(script, "w") as f:
            f.write(CHILD.format(bench=os.path.dirname(os.path.abspath(__file__))))
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[8])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each sampled step loop")
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--only", nargs="+", help="contenders whose name contains one of these words")
    args = parser.parse_args()
    if shutil.which("py-spy") is None:
        raise SystemExit("gil_time.py needs py-spy: pip install py-spy")
    names = [c for c in CONTENDERS if not args.only or any(word in c for word in args.only)]
    print("| contender | N | GIL held, µs per env step | env steps/s while sampled |")
    print("|---|---|---|---|")
    for n in args.sizes:
        for name in names:
            try:
                held, rate = gil_time(name, n, args.seconds, args.rate)
            except (RuntimeError, OSError) as exc:
                print(f"| {name} | {n} | failed: {str(exc).splitlines()[-1][:80]} | |")
                continue
            print(f"| {name} | {n} | {held:.1f} | {rate:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
