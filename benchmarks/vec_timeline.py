"""Where the cores idle: a timeline of the kit's native ALE backend over a few hundred vector steps.

Totals (``main_thread_cpu.py``) say how much CPU a step costs and how many cores are busy on average; this
says *when* they idle. Every thread of the native backend is instrumented (by wrapping its methods in
this script only; the package is unchanged):

- the calling thread: ``step`` entry and exit, the moment it starts waiting for the warp threads and the
  moment that wait returns;
- each warp thread: when it sends an env's action to ale-py, when it starts waiting for that env's step
  (``recv``), when the step arrives, when the frame's warp ends;
- the whole process: ``time.process_time()`` (every thread's CPU, nanosecond clock) at each of those
  moments, so the cores busy in any interval is CPU used / wall time.

Each vector step is cut into phases, averaged over the steps (cores busy = process CPU / wall):

1. ``caller``: between two steps (the benchmark only draws random actions: in training, the policy);
2. ``pre``: step entry until the warp threads are handed the step;
3. ``emulate``: until the last env's step has arrived (C++ emulation of every env, warps of the envs that
   arrived first);
4. ``warp tail``: until the last frame is warped (nothing emulates any more);
5. ``post``: the calling thread's rules, frame stack and infos until ``step`` returns.

Run by hand, never in CI::

    python benchmarks/vec_timeline.py --sizes 4 8 --steps 400 --warp-threads 1 2
    python benchmarks/vec_timeline.py --sizes 8 --plot docs/vec_timeline.png   # lanes of a few steps
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import defaultdict

import gymnasium as gym
import numpy as np

import retro_atari_kit  # noqa: F401
from retro_atari_kit.envs.ale import validate_ale_kwargs
from retro_atari_kit.vector import _warp, native_ale
from retro_atari_kit.vector._stacked import StackedVectorEnv

PHASES = ("caller", "pre", "emulate", "warp tail", "post")


class Recorder:
    """(kind, env or -1, thread name, wall, process CPU) events, appended from any thread."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str, float, float]] = []
        self.on = False

    def mark(self, kind: str, env: int = -1) -> None:
        if self.on:  # list.append is atomic under the GIL
            self.events.append(
                (kind, env, threading.current_thread().name, time.perf_counter(), time.process_time())
            )


def instrument(rec: Recorder) -> None:
    """Wrap the native backend's send / receive / warp and the calling thread's step and wait."""
    driver_cls = native_ale.NativeDriver
    send, receive, wait = driver_cls._send, driver_cls._receive, _warp.FrameWarper.wait
    warp_into = _warp.warp_into
    step = StackedVectorEnv.step

    def send_actions(self, envs, actions):
        for i, action in zip(envs, actions, strict=True):
            rec.mark("send", i)
            send(self, [i], [action])

    def receive_step(self, i):
        rec.mark("recv", i)
        frame = receive(self, i)
        rec.mark("arrived", i)
        return frame

    def warp(frame, out, grayscale, crop):
        warp_into(frame, out, grayscale, crop)
        rec.mark("warped")

    def wait_warps(self, pending):
        rec.mark("wait")
        wait(self, pending)
        rec.mark("waited")

    def timed_step(self, actions):
        rec.mark("step")
        result = step(self, actions)
        rec.mark("stepped")
        return result

    driver_cls._send, driver_cls._receive = send_actions, receive_step
    _warp.FrameWarper.wait, _warp.warp_into = wait_warps, warp
    StackedVectorEnv.step = timed_step


def make_env(n: int, warp_threads: int | None, batch: bool) -> StackedVectorEnv:
    cfg = validate_ale_kwargs("Pong", {})
    driver = native_ale.NativeDriver("Pong", n, cfg, warp_threads, batch)
    return StackedVectorEnv(driver, cfg["frame_stack"], "NextStep", "native")


def split_steps(events):
    """The events of each whole vector step, from one ``step`` mark to the next."""
    starts = [k for k, e in enumerate(events) if e[0] == "step"]
    return [events[a:b] for a, b in zip(starts, starts[1:], strict=False)]


def phases(step_events) -> dict[str, tuple[float, float]] | None:
    """{phase: (wall seconds, process CPU seconds)} of one vector step (``caller`` is the gap after it)."""
    first = {}
    last = {}
    for kind, _, _, wall, cpu in step_events:
        first.setdefault(kind, (wall, cpu))
        last[kind] = (wall, cpu)
    needed = ("step", "send", "arrived", "warped", "waited", "stepped")
    if any(k not in first for k in needed):
        return None  # a step with resets only, or a cut-off step
    points = [
        first["step"],
        first["send"],
        last["arrived"],
        last["warped"],
        last["stepped"],
    ]
    out = {}
    for name, (a, b) in zip(PHASES[1:], zip(points, points[1:], strict=False), strict=False):
        out[name] = (b[0] - a[0], b[1] - a[1])
    return out


def summarise(events, n: int) -> dict[str, tuple[float, float]]:
    """Per phase: mean wall us per vector step and cores busy, over every whole step."""
    steps = split_steps(events)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    counted = 0
    for k, step_events in enumerate(steps[:-1]):
        p = phases(step_events)
        if p is None:
            continue
        nxt = steps[k + 1][0]
        stepped = next(e for e in reversed(step_events) if e[0] == "stepped")
        p["caller"] = (nxt[3] - stepped[3], nxt[4] - stepped[4])
        for name, (wall, cpu) in p.items():
            totals[name][0] += wall
            totals[name][1] += cpu
        counted += 1
    return {
        name: (totals[name][0] / counted * 1e6, totals[name][1] / max(totals[name][0], 1e-12))
        for name in PHASES
    }


def plot(events, n: int, path: str, first: int = 20, count: int = 3) -> None:
    """Lanes (calling thread, warp threads, emulation of each env) over ``count`` vector steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = split_steps(events)[first : first + count]
    span = [e for s in steps for e in s]
    t0 = span[0][3]
    fig, ax = plt.subplots(figsize=(12, 0.45 * (n + 4) + 1))
    lanes: list[str] = []

    def lane(name: str) -> int:
        if name not in lanes:
            lanes.append(name)
        return lanes.index(name)

    def bar(name, a, b, color):
        ax.broken_barh([((a - t0) * 1e6, (b - a) * 1e6)], (lane(name) - 0.4, 0.8), color=color)

    for s in steps:
        marks = {e[0]: e for e in s}
        step_wall = next(e[3] for e in s if e[0] == "step")
        wait_wall = next(e[3] for e in s if e[0] == "wait")
        waited_wall = next(e[3] for e in s if e[0] == "waited")
        bar("calling thread", step_wall, wait_wall, "tab:blue")
        bar("calling thread", waited_wall, marks["stepped"][3], "tab:blue")
        sent: dict[int, float] = {}
        recv_start: dict[int, float] = {}
        for kind, env, thread, wall, _ in s:
            if kind == "send":
                sent[env] = wall
            elif kind == "recv":
                recv_start[env] = wall
            elif kind == "arrived":
                # emulation ran at most from the send to the arrival (earlier if recv returned at once)
                end = wall if wall - recv_start[env] > 20e-6 else recv_start[env]
                bar(f"env {env} emulation (upper bound)", sent[env], end, "tab:orange")
                last_arrival = (thread, wall)
            elif kind == "warped":
                bar(thread, last_arrival[1], wall, "tab:green")
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel("microseconds")
    ax.set_title(f"native backend, Pong, N={n}: calling thread (blue), warps (green), emulation (orange)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--steps", type=int, default=400, help="vector steps recorded per size")
    parser.add_argument("--warp-threads", type=int, nargs="+", default=[None], help="default: the kit's")
    parser.add_argument(
        "--no-batch", action="store_true", help="leave the emulator threads under the default scheduler"
    )
    parser.add_argument("--plot", help="write a lanes figure of a few steps of the last size here")
    args = parser.parse_args()
    rec = Recorder()
    instrument(rec)
    for threads in args.warp_threads:
        for n in args.sizes:
            env = make_env(n, threads, not args.no_batch)
            rng = np.random.default_rng(0)
            env.reset(seed=0)
            for _ in range(50):
                env.step(rng.integers(0, 6, n))
            rec.events.clear()
            rec.on = True
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                env.step(rng.integers(0, 6, n))
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            rec.on = False
            used = env.driver.warper.threads
            env.close()
            summary = summarise(rec.events, n)
            label = f"N={n}, warp threads={used}"
            print(f"\n{label}: {args.steps * n / wall:,.0f} env steps/s, {cpu / wall:.2f} cores busy overall")
            print(f"{'phase':<10} {'us/step':>8} {'share':>6} {'cores busy':>10}")
            total = sum(v[0] for v in summary.values())
            for name in PHASES:
                us, cores = summary[name]
                print(f"{name:<10} {us:8.0f} {us / total:6.0%} {cores:10.2f}")
            if args.plot and n == args.sizes[-1] and threads == args.warp_threads[-1]:
                plot(rec.events, n, args.plot)


if __name__ == "__main__":
    gym.logger.min_level = 40
    main()
