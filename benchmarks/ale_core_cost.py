"""Below the warp: what one env step of the native backend's emulator core costs, against ALE alone.

The native backend drives one single-env ale-py ``AtariVectorEnv`` per env (its resets step one env alone,
which an N-env one cannot), so each env step pays ale-py's hand-off between threads once per env instead
of once per batch. ale-py's queues wait on ``moodycamel::LightweightSemaphore``, which spins (10,000 tries)
before it sleeps: the core's thread after every step, while it waits for the next action, and the caller's
``recv`` while the step runs. This measures, per env step (CPU µs; medians of the rounds):

- **ALE alone**: ``ALEInterface.act`` four times, the last two RGB screens, their max (the kit's frame
  skip), in one thread: the emulation itself;
- **single-env core, its thread**: one ``AtariVectorEnv`` with the kit's settings
  (``native_ale.make_core``), stepped as the kit steps it (``send``, ``recv``, then ``--gap`` µs of other
  work before the next ``send``): the CPU of every thread but the caller's;
- **single-env core, the caller**: ``send``, and ``recv`` once while the step runs (it spins, then sleeps)
  and once after it finished (``--gap`` µs later: the result is waiting);
- **one N-env core, per env**: one ``AtariVectorEnv`` of ``--envs`` envs with the same settings and one
  thread per core, stepped together: the hand-off shared by the batch.

Run by hand on an idle machine::

    python benchmarks/ale_core_cost.py --rounds 5
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402

GAME = "Pong"


def _cfg() -> dict:
    from retro_atari_kit.envs.ale import validate_ale_kwargs

    return validate_ale_kwargs(GAME, {"noop_max": 0})


def _busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def ale_alone(steps: int) -> float:
    """CPU µs per env step of the kit's frame skip on ``ALEInterface`` (one thread)."""
    from ale_py import ALEInterface, LoggerMode, roms

    from retro_atari_kit.catalog import ale_game

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setInt("random_seed", 0)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(roms.get_rom_path(ale_game(GAME).rom))
    ale.reset_game()
    screens = np.zeros((2, 210, 160, 3), dtype=np.uint8)
    pooled = np.empty((210, 160, 3), dtype=np.uint8)
    t0 = time.thread_time()
    for _ in range(steps):
        for frame in range(4):
            ale.act(0)
            if frame >= 2:
                ale.getScreenRGB(screens[frame - 2])
        np.maximum(screens[0], screens[1], out=pooled)
        if ale.game_over():
            ale.reset_game()
    return (time.thread_time() - t0) / steps * 1e6


def single_core(steps: int, gap_us: float) -> dict[str, float]:
    """Per env step of one single-env core stepped as the kit steps it: its thread's CPU, the caller's
    ``send``, ``recv`` while the step runs and ``recv`` of a finished step (µs)."""
    from retro_atari_kit.catalog import ale_game
    from retro_atari_kit.vector.native_ale import make_core

    core = make_core(ale_game(GAME).rom, _cfg())
    ale = core.ale
    core.reset(seed=np.array([0]))
    send = recv_running = recv_done = 0.0
    process0, caller0 = time.process_time(), time.thread_time()
    for step in range(steps):
        t0 = time.thread_time()
        ale.send([0], [1.0])
        t1 = time.thread_time()
        if step % 2:  # a finished step: recv after the step's time has passed
            _busy(gap_us)
            t1b = time.thread_time()
            ale.recv()
            recv_done += time.thread_time() - t1b
        else:
            ale.recv()
            recv_running += time.thread_time() - t1
            _busy(gap_us)
        send += t1 - t0
    worker = (time.process_time() - process0) - (time.thread_time() - caller0)
    core.close()
    half = steps / 2
    return {
        "thread": worker / steps * 1e6,
        "send": send / steps * 1e6,
        "recv running": recv_running / half * 1e6,
        "recv done": recv_done / half * 1e6,
    }


def batch_core(steps: int, envs: int) -> float:
    """CPU µs per env step of one ``envs``-env core with the same settings, one thread per core."""
    from retro_atari_kit.catalog import ale_game
    from retro_atari_kit.vector.native_ale import make_core

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    env = make_core(ale_game(GAME).rom, _cfg(), num_envs=envs, num_threads=min(cores, envs))
    env.reset(seed=0)
    actions = np.zeros(envs, dtype=np.int64)
    rounds = max(1, steps // envs)
    with harness.CpuMeter() as meter:
        for _ in range(rounds):
            env.step(actions)
    env.close()
    return meter.usage.cpu / (rounds * envs) * 1e6


def main(argv: list[str] | None = None) -> int:
    p = harness.add_common_options(harness.parser(__doc__))
    p.add_argument("--steps", type=int, default=4000, help="env steps per measurement (default 4000)")
    p.add_argument("--gap", type=float, default=200.0, help="µs of other work between recv and send (200)")
    p.add_argument("--envs", type=int, default=8, help="envs of the N-env core (default 8)")
    args = p.parse_args(argv)
    steps, rounds = (200, 1) if args.quick else (args.steps, args.rounds)
    cells = {
        "alone": lambda: ale_alone(steps),
        "single": lambda: single_core(steps, args.gap),
        "batch": lambda: batch_core(steps, args.envs),
    }
    samples = harness.alternate(cells, rounds)
    report = harness.Report()
    report.add(
        f"## One env step below the warp, {GAME}: CPU µs per env step (median of {samples.rounds}; "
        f"{steps} steps each; load average {harness.load_average()})",
        "",
    )
    alone = samples.median("alone")
    thread = samples.median("single", "thread")
    beyond = None if None in (thread, alone) else thread - alone
    rows = [
        ("ALE alone (4 frames, 2 RGB screens, their max)", alone),
        ("single-env core, its thread", thread),
        ("  of which beyond ALE alone", beyond),
        ("single-env core, caller: send", samples.median("single", "send")),
        ("single-env core, caller: recv while the step runs", samples.median("single", "recv running")),
        ("single-env core, caller: recv of a finished step", samples.median("single", "recv done")),
        (f"{args.envs}-env core, per env step (every thread)", samples.median("batch")),
    ]
    report.table(
        ["what", "µs per env step", "/ ALE alone"],
        [
            [what, harness.num(us), harness.ratio(None if None in (us, alone) else us / alone)]
            for what, us in rows
        ],
    )
    report.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
