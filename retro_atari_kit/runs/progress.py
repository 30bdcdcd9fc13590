"""The engine's progress table across resumes, and the logs of a run that died past its checkpoint.

A resumed segment ``k`` logs to ``progress.part<k>.csv``; ``merge_progress`` folds the parts into
``progress.csv`` (union of columns) when the segment ends, so readers see one table.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil

from retro_atari_kit.csv_cells import csv_row
from retro_atari_kit.files import atomic_write_bytes, atomic_write_text
from retro_atari_kit.runs.checkpoints import CHECKPOINT_DIR
from retro_atari_kit.runs.layout import CONFIG_FILE, ORPHANED_PREFIX, glob_in
from retro_atari_kit.runs.lock import LOCK_FILE
from retro_atari_kit.runs.monitor import monitor_files, split_monitor_csv

PROGRESS_FILE = "progress.csv"
STEPS_COLUMN = "time/total_timesteps"


def progress_path(run_dir: str, segment: int = 0) -> str:
    """``progress.csv`` for the first segment, ``progress.part<k>.csv`` for the k-th resume."""
    return os.path.join(run_dir, PROGRESS_FILE if segment == 0 else f"progress.part{segment}.csv")


def progress_parts(run_dir: str) -> list[str]:
    """The ``progress.part<k>.csv`` of resumed segments not merged yet, in segment order."""
    return sorted(
        glob_in(run_dir, "progress.part*.csv"),
        key=lambda p: int(m.group(1)) if (m := re.search(r"part(\d+)\.csv$", p)) else 0,
    )


def _read_table(path: str) -> tuple[list[str], list[list[str]], int]:
    """``(columns, rows, dropped lines)`` of a progress CSV, reading past damage.

    Lines that cannot be a row of the table (a field count other than the header's, a repeated header,
    NUL bytes or a cut-off last line of a killed writer) are dropped and counted, never raised: a damaged
    part file must not make the run unresumable.
    """
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        lines = fh.read().replace("\0", "").splitlines()
    columns: list[str] = []
    rows: list[list[str]] = []
    dropped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            fields = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            dropped += 1
            continue
        if not columns:
            if _numbers(fields):  # the header line is lost: no row can be told apart from another
                return [], [], sum(1 for line in lines if line.strip())
            columns = fields
        elif fields == columns:
            dropped += 1
        elif len(fields) != len(columns):
            dropped += 1
        else:
            rows.append(fields)
    return columns, rows, dropped


def _numbers(fields: list[str]) -> bool:
    try:
        return any(fields) and all(float(f) or True for f in fields if f)
    except ValueError:
        return False


def merge_progress(run_dir: str) -> str | None:
    """Fold ``progress.part<k>.csv`` of resumed segments into ``progress.csv`` (union of columns).

    Damaged lines are left out of the merged table; the files they came from are kept as they were under
    ``orphaned-<k>/``. A part that cannot be read at all (permissions) is left where it is, unmerged. Returns
    a one-line note when either happened, else None.
    """
    parts = progress_parts(run_dir)
    if not parts:
        return None
    main = progress_path(run_dir)
    rows: list[dict[str, str]] = []
    columns: list[str] = []
    damaged: list[tuple[str, int]] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    unread: list[str] = []
    for path in [main, *parts]:
        if not os.path.exists(path):
            continue
        try:
            names, table, dropped = _read_table(path)
        except OSError:
            unread.append(path)
            continue
        if dropped:
            damaged.append((path, dropped))
        columns.extend(c for c in names if c not in columns)
        for row in table:
            record = {k: v for k, v in zip(names, row, strict=True) if v != ""}
            key = tuple(sorted(record.items()))
            if key in seen:  # a part merged before, by a merge that was killed before removing it
                continue
            seen.add(key)
            rows.append(record)

    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(csv_row(columns))
    writer.writerows(csv_row(row.get(c, "") for c in columns) for row in rows)
    notes = []
    if damaged:
        aside = _new_aside_dir(run_dir)
        for path, _ in damaged:
            shutil.copy2(path, os.path.join(aside, os.path.basename(path)))
        notes.append(f"left out {sum(n for _, n in damaged)} damaged lines; originals in {aside}")
    if unread:
        notes.append(f"cannot read {', '.join(unread)}; left as it was, not merged")
    if main in unread:  # rewriting it would lose its rows
        return "progress logs: " + "; ".join(notes)
    atomic_write_text(main, text.getvalue())
    for path in parts:
        if path not in unread:
            os.remove(path)
    return "progress logs: " + "; ".join(notes) if notes else None


def _new_aside_dir(run_dir: str) -> str:
    k = 1 + len(glob_in(run_dir, ORPHANED_PREFIX + "*"))
    aside = os.path.join(run_dir, f"{ORPHANED_PREFIX}{k}")
    os.makedirs(aside, exist_ok=True)
    return aside


def _split_progress(path: str, steps: int) -> tuple[list[bytes], list[bytes]]:
    """Raw lines of progress.csv: (header + rows up to ``steps``, rows past it). OSError if unreadable."""
    with open(path, "rb") as fh:
        raw = fh.read().splitlines(keepends=True)

    def fields(line: bytes) -> list[str]:  # damaged bytes read as U+FFFD: never a number, never a column
        return next(csv.reader([line.decode("utf-8", "replace").replace("\0", "")]), [])

    try:
        columns = fields(raw[0]) if raw else []
    except csv.Error:
        return raw, []
    if STEPS_COLUMN not in columns:
        return raw, []
    col = columns.index(STEPS_COLUMN)
    kept, later = raw[:1], []
    for line in raw[1:]:
        try:
            in_time = float(fields(line)[col]) <= steps
        except (ValueError, IndexError, csv.Error):
            in_time = True  # malformed lines are kept
        (kept if in_time else later).append(line)
    return kept, later


def set_aside_orphaned_logs(run_dir: str, steps: int, saved_at: float) -> str | None:
    """Move log rows written after the checkpoint a resume starts from into ``orphaned-<k>/``.

    A run that died without saving (SIGKILL, power loss, OOM) logged games and updates past its last
    checkpoint. The resumed model does not descend from them, so left in place they would double-count
    that stretch in plots and progress.csv. Rows of ``progress.csv`` past ``steps`` and monitor games that
    ended after ``saved_at`` (the checkpoint's write time) leave the live files; the untouched originals
    are kept under ``orphaned-<k>/``. Returns a one-line summary, or None if nothing was logged after the
    checkpoint (the usual case: Ctrl-C / SIGTERM save a checkpoint at the stop).
    """
    rewrites: dict[str, list[bytes]] = {}
    unread: list[str] = []
    dropped_games = dropped_rows = 0
    for path in monitor_files(run_dir):
        try:
            kept, later = split_monitor_csv(path, saved_at)
        except OSError:
            unread.append(path)
            continue
        if later:
            rewrites[path], dropped_games = kept, dropped_games + len(later)
    progress = progress_path(run_dir)
    if os.path.exists(progress):
        try:
            kept, later = _split_progress(progress, steps)
        except OSError:
            unread.append(progress)
            kept, later = [], []
        if later:
            rewrites[progress], dropped_rows = kept, len(later)
    cannot = f"cannot read {', '.join(unread)}; left as it was" if unread else None
    if not rewrites:
        return cannot
    aside = _new_aside_dir(run_dir)
    for path, lines in rewrites.items():
        backup = os.path.join(aside, os.path.relpath(path, run_dir))
        os.makedirs(os.path.dirname(backup), exist_ok=True)
        shutil.copy2(path, backup)
        atomic_write_bytes(path, b"".join(lines), mode=os.stat(path).st_mode & 0o777)
    summary = (
        f"the run had logged past its last checkpoint ({steps} steps): set aside {dropped_games} games "
        f"and {dropped_rows} progress rows; originals in {aside}"
    )
    return f"{summary}; {cannot}" if cannot else summary


def set_aside_unsaved_start(run_dir: str) -> str | None:
    """Move the logs of a run that was killed before its first checkpoint into ``orphaned-<k>/``.

    Such a run (SIGKILL, the OOM killer, a power loss before anything was saved) is resumed from its start:
    its monitor games, progress rows, evaluations and log lines describe training nothing descends from, so
    they leave the live files (which the new start writes afresh) and are kept, untouched, under
    ``orphaned-<k>/``. ``config.yaml``, ``checkpoints/``, the lock and earlier ``orphaned-*`` stay. Returns a
    one-line summary, or None if there was nothing to move. Call it holding the run's lock, after every check
    of the resume has passed.
    """
    keep = {CONFIG_FILE, CHECKPOINT_DIR, LOCK_FILE}
    moving = sorted(
        name for name in os.listdir(run_dir) if name not in keep and not name.startswith(ORPHANED_PREFIX)
    )
    if not moving:
        return None
    aside = _new_aside_dir(run_dir)
    for name in moving:
        os.replace(os.path.join(run_dir, name), os.path.join(aside, name))
    return (
        f"the run was stopped before its first checkpoint; its logs ({', '.join(moving)}) are kept in {aside}"
    )
