"""``retrokit plot RUN_DIR...``: learning curves of the true score from the runs' monitor CSVs."""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

from retro_atari_kit.cli._common import CliError, positive_int


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="learning curves (true score) of one or more runs -> PNG",
                       description="Overlay the true-score curves of several runs; one column per "
                       "smoothing window (moving average over episodes).")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--x", choices=["steps", "episodes", "time"], default="steps")
    p.add_argument("--smooth", type=positive_int, nargs="+", default=[10, 100], metavar="N",
                   help="moving-average windows in episodes, one column each (default 10 100)")
    p.add_argument("--out", default="curves.png")
    p.add_argument("--title", default=None)
    p.set_defaults(func=run)


# Where ``retrokit train --resume`` keeps logs written past the checkpoint of a run that died without saving.
ORPHANED_PREFIX = "orphaned-"


def monitor_header(lines: list[str]) -> tuple[float | None, list[str], int]:
    """``(t_start, column names, header line count)`` of a monitor CSV's lines.

    The baselines / SB3 format opens with ``#{"t_start": ..., ...}`` and a column line; ``t_start`` is
    None without that comment line and 0.0 if it cannot be read.
    """
    if not lines or not lines[0].startswith("#"):
        t_start, n_header = None, 1
    else:
        try:
            t_start = float(json.loads(lines[0][1:]).get("t_start", 0.0))
        except (ValueError, AttributeError):
            t_start = 0.0
        n_header = 2
    header = lines[n_header - 1] if len(lines) >= n_header else ""
    return t_start, [c.strip() for c in header.strip().split(",")], n_header


def read_monitor_csvs(run_dir: str) -> dict[str, np.ndarray]:
    """All episodes of a run (every ``*.monitor.csv`` under ``run_dir`` but ``orphaned-<k>/``), by end time.

    Returns arrays ``r`` (true score), ``l`` (agent steps), ``t`` (seconds since the run started),
    ``steps`` (cumulative agent steps, all envs).
    """
    files = sorted(p for p in glob.glob(os.path.join(run_dir, "**", "*.monitor.csv"), recursive=True)
                   if not os.path.relpath(p, run_dir).startswith(ORPHANED_PREFIX))
    if not files:
        raise CliError(f"{run_dir}: no monitor CSVs (*.monitor.csv); pass a run dir from retrokit train")
    rows = []
    starts = []
    for path in files:
        with open(path) as fh:
            lines = fh.readlines()
        t_start, cols, n_header = monitor_header(lines)
        if t_start is not None:
            starts.append(t_start)
        try:
            ir, il, it = cols.index("r"), cols.index("l"), cols.index("t")
        except ValueError:
            raise CliError(f"{path}: not a monitor CSV (needs columns r,l,t)") from None
        for line in lines[n_header:]:
            parts = line.strip().split(",")
            if len(parts) < len(cols):
                continue  # a line being written right now
            try:
                rows.append(((t_start or 0.0) + float(parts[it]), float(parts[ir]), float(parts[il])))
            except ValueError:
                continue
    rows.sort()
    if not rows:
        return {k: np.zeros(0) for k in ("r", "l", "t", "steps")}
    a = np.asarray(rows)
    t0 = min(starts) if starts else 0.0
    return {"r": a[:, 1], "l": a[:, 2], "t": a[:, 0] - t0, "steps": np.cumsum(a[:, 2])}


def moving_average(y: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` previous episodes (shorter at the start)."""
    c = np.cumsum(np.insert(y.astype(np.float64), 0, 0.0))
    idx = np.arange(1, y.size + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def plot_runs(run_dirs: list[str], out: str, x: str = "steps", smooth: list[int] | None = None,
              title: str | None = None) -> str:
    """Write the PNG; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    smooth = smooth or [10, 100]
    data = [(os.path.basename(os.path.normpath(d)), read_monitor_csvs(d)) for d in run_dirs]
    fig, axes = plt.subplots(1, len(smooth), figsize=(5.5 * len(smooth), 4), squeeze=False)
    for ax, w in zip(axes[0], smooth, strict=True):
        for label, d in data:
            if d["r"].size == 0:
                continue
            xs = {"steps": d["steps"], "episodes": np.arange(1, d["r"].size + 1), "time": d["t"] / 3600}[x]
            ax.plot(xs, moving_average(d["r"], w), label=f"{label} ({d['r'].size} games)")
        ax.set_title(f"true score, mean of last {w} games")
        ax.set_xlabel({"steps": "agent steps", "episodes": "games", "time": "hours"}[x])
        ax.set_ylabel("true game score")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(out)}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, out)
    return out


def run(args: argparse.Namespace) -> int:
    for d in args.run_dirs:
        if not os.path.isdir(d):
            raise CliError(f"{d}: no such run dir")
    if not args.out.lower().endswith(".png"):
        raise CliError(f"--out {args.out!r}: use a .png file name")
    data = {d: read_monitor_csvs(d) for d in args.run_dirs}
    out = plot_runs(args.run_dirs, args.out, x=args.x, smooth=args.smooth, title=args.title)
    for d, v in data.items():
        last = v["r"][-100:]
        mean = f"{last.mean():.2f}" if last.size else "n/a"
        print(f"{d}: {v['r'].size} games, {int(v['steps'][-1]) if v['r'].size else 0} steps, "
              f"mean of last {last.size}: {mean}")
    print(f"wrote {out}")
    return 0
