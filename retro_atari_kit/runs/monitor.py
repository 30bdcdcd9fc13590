"""The monitor CSV: one ``<rank>.monitor.csv`` per env with the TRUE game score of every finished game.

The format is baselines' / SB3's ``Monitor`` format, so their readers (``stable_baselines3.common.monitor.
load_results``) and ours read the same files::

    #{"t_start": 1700000000.0, "env_id": "RetroKit/Pong-v0"}
    r,l,t
    -21.0,764,12.345678

``r`` is the score, ``l`` the length in agent steps, ``t`` seconds since ``t_start``. The writer and every
reader live here.
"""

from __future__ import annotations

import glob
import json
import os
import time

import numpy as np

from retro_atari_kit.errors import RunError
from retro_atari_kit.runs.layout import ORPHANED_PREFIX

SUFFIX = ".monitor.csv"


class MonitorCSV:
    """Writes ``monitor_dir/<rank>.monitor.csv`` for ``num_envs`` envs; each row flushed as it is written."""

    def __init__(self, monitor_dir: str, env_id: str, num_envs: int) -> None:
        os.makedirs(monitor_dir, exist_ok=True)
        self.t_start = time.time()
        self.paths = [os.path.join(monitor_dir, f"{rank}{SUFFIX}") for rank in range(num_envs)]
        self.files = []
        for path in self.paths:
            handle = open(path, "w", encoding="utf-8")  # noqa: SIM115  (kept open for the run)
            handle.write("#" + json.dumps({"t_start": self.t_start, "env_id": env_id}) + "\n")
            handle.write("r,l,t\n")
            handle.flush()
            self.files.append(handle)

    def write(self, rank: int, score: float, length: int) -> None:
        """Append one finished game of env ``rank``."""
        handle = self.files[rank]
        handle.write(f"{round(float(score), 6)},{int(length)},{round(time.time() - self.t_start, 6)}\n")
        handle.flush()

    def close(self) -> None:
        """Close every file. Idempotent."""
        for handle in self.files:
            if not handle.closed:
                handle.close()


def monitor_header(lines: list[str]) -> tuple[float | None, list[str], int]:
    """``(t_start, column names, header line count)`` of a monitor CSV's lines.

    ``t_start`` is None without the ``#{...}`` comment line and 0.0 if that line cannot be read.
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


def monitor_files(run_dir: str, include_orphaned: bool = False) -> list[str]:
    """Every ``*.monitor.csv`` under ``run_dir`` (resumed segments included; set-aside logs only if asked)."""
    paths = glob.glob(os.path.join(run_dir, "**", f"*{SUFFIX}"), recursive=True)
    if not include_orphaned:
        paths = [p for p in paths if not os.path.relpath(p, run_dir).startswith(ORPHANED_PREFIX)]
    return sorted(paths)


def split_monitor_csv(path: str, saved_at: float) -> tuple[list[str], list[str]]:
    """Lines of a monitor CSV: (header + games that ended by ``saved_at``, games that ended later)."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = fh.readlines()
    t_start, cols, n_header = monitor_header(lines)
    if t_start is None or "t" not in cols:
        return lines, []  # not ours to judge: keep everything
    t_col = cols.index("t")
    kept, later = lines[:n_header], []
    for line in lines[n_header:]:
        try:
            ended_in_time = t_start + float(line.split(",")[t_col]) <= saved_at
        except (ValueError, IndexError):
            ended_in_time = True  # malformed lines are kept
        (kept if ended_in_time else later).append(line)
    return kept, later


def read_monitor_csvs(run_dir: str, skipped: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """All games of a run (all envs and resumed segments, not set-aside logs), ordered by end time.

    Returns arrays ``r`` (true score), ``l`` (agent steps), ``t`` (seconds since the run started) and
    ``steps`` (cumulative agent steps over all envs). RunError if the run has no monitor CSV. Rows that are
    not numbers are left out; ``skipped``, if given, receives ``{path: number of such rows}`` for every file
    that had any (a short last line, being written right now, is not counted).
    """
    files = monitor_files(run_dir)
    if not files:
        raise RunError(f"{run_dir}: no monitor CSVs (*{SUFFIX}); pass a run dir from retrokit train")
    rows = []
    starts = []
    for path in files:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
        t_start, cols, n_header = monitor_header(lines)
        if t_start is not None:
            starts.append(t_start)
        try:
            ir, il, it = cols.index("r"), cols.index("l"), cols.index("t")
        except ValueError:
            raise RunError(f"{path}: not a monitor CSV (needs columns r,l,t)") from None
        body = lines[n_header:]
        bad = 0
        for i, line in enumerate(body):
            parts = line.strip().split(",")
            if len(parts) < len(cols):
                bad += bool(line.strip()) and i < len(body) - 1  # the last one may be being written now
                continue
            try:
                rows.append(((t_start or 0.0) + float(parts[it]), float(parts[ir]), float(parts[il])))
            except ValueError:
                bad += 1
        if bad and skipped is not None:
            skipped[path] = bad
    rows.sort()
    if not rows:
        return {k: np.zeros(0) for k in ("r", "l", "t", "steps")}
    table = np.asarray(rows)
    t0 = min(starts) if starts else 0.0
    return {"r": table[:, 1], "l": table[:, 2], "t": table[:, 0] - t0, "steps": np.cumsum(table[:, 2])}
