"""When a run first reached a score: the first game after which the trailing mean of the last ``--window``
true scores (all envs, by end time, from the run's monitor CSVs) is at least ``--target``.

Prints one markdown table: the game, the agent steps of the finished games up to it (a lower bound on the
run's step count then: games in flight, and games cut short where the run resumed, are not in it), the
seconds since the monitor started and, with ``--since`` (a Unix time, e.g. ``date +%s.%N`` taken before the
command), since the command started (start-up, env start and compile included). Exit status 1 when the
target was not reached. Run by hand::

    python scripts/time_to_score.py runs/pong-gpu --target 18 --since 1795000000.0
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from retro_atari_kit.runs.monitor import monitor_files, monitor_header, read_monitor_csvs


def first_reach(scores: np.ndarray, target: float, window: int) -> int | None:
    """Index of the first game whose trailing ``window``-game mean is >= ``target`` (a full window only)."""
    if len(scores) < window:
        return None
    means = np.convolve(scores, np.ones(window) / window, mode="valid")
    hits = np.flatnonzero(means >= target)
    return None if hits.size == 0 else int(hits[0]) + window - 1


def monitor_start(run_dir: str) -> float | None:
    """The earliest ``t_start`` (Unix time) of the run's monitor CSVs."""
    starts = []
    for path in monitor_files(run_dir):
        with open(path) as fh:
            t_start = monitor_header(fh.read(4096).splitlines())[0]
        if t_start is not None:
            starts.append(t_start)
    return min(starts) if starts else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--target", type=float, default=18.0)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--since", type=float, default=None, help="the command's start, a Unix time")
    args = parser.parse_args(argv)
    games = read_monitor_csvs(args.run_dir)
    index = first_reach(games["r"], args.target, args.window)
    _row(
        "run",
        "games",
        f"target ({args.window}-game mean)",
        "game",
        "agent steps of finished games",
        "s since monitor",
        "s since command",
    )
    print("|---|---|---|---|---|---|---|")
    if index is None:
        last = games["r"][-args.window :].mean() if len(games["r"]) else float("nan")
        _row(args.run_dir, len(games["r"]), args.target, f"not reached (last mean {last:.2f})", "", "", "")
        return 1
    seconds = games["t"][index]
    since = ""
    start = monitor_start(args.run_dir)
    if args.since is not None and start is not None:
        since = f"{start + seconds - args.since:.1f}"
    steps = int(games["steps"][index])
    _row(args.run_dir, len(games["r"]), args.target, index + 1, f"{steps:,}", f"{seconds:.1f}", since)
    return 0


def _row(*cells: object) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
