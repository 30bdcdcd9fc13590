"""When a run first reached a score: the first game after which the trailing mean of the last ``--window``
true scores (all envs, by end time, from the run's monitor CSVs) is at least ``--target``.

Prints one markdown table: the game; the run's agent steps when it ended (the count of the logger and the
checkpoints: ``read_monitor_csvs``'s ``run_steps``, known where the monitor CSVs have ``segment_steps``, as
the SB3 engine writes them; for older runs read off the logger's clock and marked ``~``, see
:func:`logger_clock_steps`; else blank); the sum of the lengths of the games finished by then (near that
count, not it: games in flight and games cut short where the run resumed are missing, the stack's reset
steps are in); the seconds since the monitor started and, with ``--since`` (a Unix time, e.g. ``date
+%s.%N`` taken before the command), since the command started (start-up, env start and compile included).
With ``--every STEPS``, a second table: the training mean (of the last ``--window`` games that ended by
then, or all of them while there are fewer) at every STEPS agent steps and at the last game, as
results.md's curves give it. Exit status 1 when the target was not reached. Run by hand::

    python scripts/time_to_score.py runs/pong-gpu --target 18 --since 1795000000.0
    python scripts/time_to_score.py results/pong-ppo-impala-0 --every 100000
"""

from __future__ import annotations

import argparse
import csv
import os
import sys

import numpy as np

from retro_atari_kit.runs.monitor import agent_steps, monitor_files, monitor_header, read_monitor_csvs
from retro_atari_kit.runs.progress import STEPS_COLUMN, progress_parts, progress_path

ELAPSED_COLUMN = "time/time_elapsed"


def first_reach(scores: np.ndarray, target: float, window: int) -> int | None:
    """Index of the first game whose trailing ``window``-game mean is >= ``target`` (a full window only)."""
    if len(scores) < window:
        return None
    means = np.convolve(scores, np.ones(window) / window, mode="valid")
    hits = np.flatnonzero(means >= target)
    return None if hits.size == 0 else int(hits[0]) + window - 1


def segment_starts(run_dir: str) -> dict[str, float]:
    """Each monitor folder's earliest ``t_start`` (Unix time): ``monitor/`` and each ``resume-<k>/``."""
    starts: dict[str, float] = {}
    for path in monitor_files(run_dir):
        with open(path) as fh:
            t_start = monitor_header(fh.read(4096).splitlines())[0]
        if t_start is not None:
            folder = os.path.dirname(path)
            starts[folder] = min(t_start, starts.get(folder, t_start))
    return starts


def monitor_start(run_dir: str) -> float | None:
    """The earliest ``t_start`` (Unix time) of the run's monitor CSVs."""
    return min(segment_starts(run_dir).values(), default=None)


def logger_clock_steps(run_dir: str, games: dict[str, np.ndarray]) -> np.ndarray | None:
    """The run's step count at each game's end for runs whose monitor CSVs predate ``segment_steps``.

    ``progress.csv`` pairs the logger's step count with its seconds since the segment's training began
    (the clock starts again at each resume); each segment's monitor folder gives the wall time it began.
    A game's count is interpolated at its end time in its segment. An estimate: the monitor starts when the
    envs are made, a few seconds before the logger's clock. None where the two do not line up (another
    number of segments, no progress table).
    """
    rows = []
    try:  # a running segment's rows are still in its progress.part<k>.csv (merged when it ends)
        for path in [progress_path(run_dir), *progress_parts(run_dir)]:
            with open(path, encoding="utf-8", newline="") as fh:
                rows += [(float(r[ELAPSED_COLUMN]), float(r[STEPS_COLUMN])) for r in csv.DictReader(fh)]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    segments: list[list[tuple[float, float]]] = []
    for elapsed, steps in rows:
        if not segments or elapsed < segments[-1][-1][0]:  # the clock started again: a resume
            segments.append([])
        segments[-1].append((elapsed, steps))
    starts = sorted(segment_starts(run_dir).values())
    if not starts or len(starts) != len(segments):
        return None
    ends = starts[0] + games["t"]  # games["t"] counts from the earliest start
    estimate = np.empty(len(ends))
    begun = 0.0  # the count a segment starts from: where the one before it left off
    for k, (start, segment) in enumerate(zip(starts, segments, strict=True)):
        later = starts[k + 1] if k + 1 < len(starts) else np.inf
        mine = (ends >= start) & (ends < later)
        elapsed, steps = zip(*[(0.0, begun), *segment], strict=True)
        estimate[mine] = np.interp(ends[mine] - start, elapsed, steps)
        begun = segment[-1][1]
    return estimate.astype(np.int64)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--target", type=float, default=18.0)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--since", type=float, default=None, help="the command's start, a Unix time")
    parser.add_argument("--every", type=int, default=None, help="also the training mean every STEPS steps")
    args = parser.parse_args(argv)
    games = read_monitor_csvs(args.run_dir)
    estimated = "run_steps" not in games and (clock := logger_clock_steps(args.run_dir, games)) is not None
    if estimated:
        games["run_steps"] = clock
    reached = _first_reach_table(args, games, "~" if estimated else "")
    if args.every:
        print()
        _curve_table(games, args.every, args.window, "~" if estimated else "")
    return 0 if reached else 1


def _curve_table(games: dict[str, np.ndarray], every: int, window: int, about: str) -> None:
    """The training mean at every ``every`` agent steps and at the last game (see the module docstring)."""
    steps, scores = agent_steps(games), games["r"]
    last = int(steps[-1]) if len(steps) else 0
    marks = [*range(every, last + 1, every)]
    if last and (not marks or marks[-1] != last):
        marks.append(last)
    means = []
    for mark in marks:
        ended = scores[steps <= mark][-window:]
        means.append(f"{ended.mean():.2f}" if len(ended) else "")
    label = "agent steps" if "run_steps" in games else "agent steps of finished games"
    _row(label, *(f"{about}{m:,}" for m in marks))
    print("|---" * (len(marks) + 1) + "|")
    _row(f"training mean ({window} games)", *means)


def _first_reach_table(args: argparse.Namespace, games: dict[str, np.ndarray], about: str) -> bool:
    index = first_reach(games["r"], args.target, args.window)
    _row(
        "run",
        "games",
        f"target ({args.window}-game mean)",
        "game",
        "agent steps",
        "agent steps of finished games",
        "s since monitor",
        "s since command",
    )
    print("|---|---|---|---|---|---|---|---|")
    if index is None:
        last = games["r"][-args.window :].mean() if len(games["r"]) else float("nan")
        missed = f"not reached (last mean {last:.2f})"
        _row(args.run_dir, len(games["r"]), args.target, missed, "", "", "", "")
        return False
    seconds = games["t"][index]
    since = ""
    start = monitor_start(args.run_dir)
    if args.since is not None and start is not None:
        since = f"{start + seconds - args.since:.1f}"
    run_steps = f"{about}{int(games['run_steps'][index]):,}" if "run_steps" in games else ""
    steps = f"{int(games['steps'][index]):,}"
    _row(args.run_dir, len(games["r"]), args.target, index + 1, run_steps, steps, f"{seconds:.1f}", since)
    return True


def _row(*cells: object) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
