"""When a run first reached a score: the first game after which the trailing mean of the last ``--window``
true scores (all envs, by end time, from the run's monitor CSVs) is at least ``--target``.

Prints one markdown table: the game; the run's agent steps when it ended (the count of the logger and the
checkpoints: ``read_monitor_csvs``'s ``run_steps``, known where the monitor CSVs have ``segment_steps``, as
the SB3 engine writes them; else blank); the sum of the lengths of the games finished by then (near that
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
import sys

import numpy as np

from retro_atari_kit.runs.monitor import agent_steps, monitor_files, monitor_header, read_monitor_csvs


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
    parser.add_argument("--every", type=int, default=None, help="also the training mean every STEPS steps")
    args = parser.parse_args(argv)
    games = read_monitor_csvs(args.run_dir)
    reached = _first_reach_table(args, games)
    if args.every:
        print()
        _curve_table(games, args.every, args.window)
    return 0 if reached else 1


def _curve_table(games: dict[str, np.ndarray], every: int, window: int) -> None:
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
    _row(label, *(f"{m:,}" for m in marks))
    print("|---" * (len(marks) + 1) + "|")
    _row(f"training mean ({window} games)", *means)


def _first_reach_table(args: argparse.Namespace, games: dict[str, np.ndarray]) -> bool:
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
    run_steps = f"{int(games['run_steps'][index]):,}" if "run_steps" in games else ""
    steps = f"{int(games['steps'][index]):,}"
    _row(args.run_dir, len(games["r"]), args.target, index + 1, run_steps, steps, f"{seconds:.1f}", since)
    return True


def _row(*cells: object) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
