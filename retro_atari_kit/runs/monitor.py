"""The monitor CSV: one ``<rank>.monitor.csv`` per env with the TRUE game score of every finished game.

The format is baselines' / SB3's ``Monitor`` format, so their readers (``stable_baselines3.common.monitor.
load_results``) and ours read the same files::

    #{"t_start": 1700000000.0, "env_id": "RetroKit/Pong-v0"}
    r,l,t,segment_steps
    -21.0,764,12.345678,6128

``r`` is the score, ``l`` the length in agent steps (the stack's own reset steps included: see
``TrueScoreStatistics``), ``t`` seconds since ``t_start``. ``segment_steps``, written by a vector env whose
envs step together (the SB3 engine's), is the count of steps all its envs had made when the game ended,
the learner's count since the segment began; a resumed segment's folder (``monitor/resume-<k>/``) holds
``start.json``, ``{"num_timesteps": N}``, the count of the checkpoint it resumed from, so the run's count
at a game's end is their sum (:func:`read_monitor_csvs`'s ``run_steps``). The writer and every reader live
here.
"""

from __future__ import annotations

import json
import math
import os
import re
import time

import numpy as np

from retro_atari_kit.errors import RunError
from retro_atari_kit.files import atomic_write_text
from retro_atari_kit.runs.layout import MONITOR_DIR, ORPHANED_PREFIX, glob_in

SUFFIX = ".monitor.csv"
DEFAULT_COLUMNS = ("r", "l", "t")  # what MonitorCSV writes; and with segment_steps:
STEP_COLUMNS = (*DEFAULT_COLUMNS, "segment_steps")
START_FILE = "start.json"
_SEGMENT = re.compile(r"resume-\d+")


class MonitorCSV:
    """Writes ``monitor_dir/<rank>.monitor.csv`` for ``num_envs`` envs; each row flushed as it is written.
    With ``segment_steps`` (envs that step together) every row also gets the steps of all envs so far."""

    def __init__(self, monitor_dir: str, env_id: str, num_envs: int, segment_steps: bool = False) -> None:
        os.makedirs(monitor_dir, exist_ok=True)
        self.t_start = time.time()
        self.segment_steps = segment_steps
        self.paths = [os.path.join(monitor_dir, f"{rank}{SUFFIX}") for rank in range(num_envs)]
        self.files = []
        columns = ",".join(STEP_COLUMNS if segment_steps else DEFAULT_COLUMNS)
        for path in self.paths:
            handle = open(path, "w", encoding="utf-8")  # noqa: SIM115  (kept open for the run)
            handle.write("#" + json.dumps({"t_start": self.t_start, "env_id": env_id}) + "\n")
            handle.write(columns + "\n")
            handle.flush()
            self.files.append(handle)

    def write(self, rank: int, score: float, length: int, segment_steps: int | None = None) -> None:
        """Append one finished game of env ``rank`` (``segment_steps`` where the writer has the column)."""
        row = f"{round(float(score), 6)},{int(length)},{round(time.time() - self.t_start, 6)}"
        handle = self.files[rank]
        handle.write(f"{row},{int(segment_steps)}\n" if self.segment_steps else f"{row}\n")
        handle.flush()

    def close(self) -> None:
        """Close every file. Idempotent."""
        for handle in self.files:
            if not handle.closed:
                handle.close()


def write_segment_start(folder: str, num_timesteps: int) -> None:
    """Record in a resumed segment's monitor ``folder`` (made if missing) the step count it resumes from."""
    os.makedirs(folder, exist_ok=True)
    atomic_write_text(os.path.join(folder, START_FILE), json.dumps({"num_timesteps": int(num_timesteps)}))


def _segment_start(folder: str) -> int | None:
    """The step count a segment's monitor ``folder`` starts from: 0 for a run's first segment (``monitor/``),
    a resumed one's ``start.json``; None when it is not recorded or cannot be read."""
    if not _SEGMENT.fullmatch(os.path.basename(folder)):
        return 0
    try:
        with open(os.path.join(folder, START_FILE), encoding="utf-8") as fh:
            steps = json.load(fh)["num_timesteps"]
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0 else None


def _header(lines: list[str]) -> tuple[float | None, list[str], int]:
    """``monitor_header``, but ``t_start`` is None whenever the start time is unknown (no ``#`` line, or one
    without a finite number under ``t_start``: cut short, NUL bytes, ``null``)."""
    if not lines or not lines[0].startswith("#"):
        t_start, n_header = None, 1
    else:
        try:
            t_start = float(json.loads(lines[0][1:])["t_start"])
        except (ValueError, TypeError, KeyError, IndexError, RecursionError):  # nested too deeply: unknown
            t_start = None
        if t_start is not None and not math.isfinite(t_start):
            t_start = None
        n_header = 2
    header = lines[n_header - 1] if len(lines) >= n_header else ""
    return t_start, [c.strip() for c in header.strip().split(",")], n_header


def monitor_header(lines: list[str]) -> tuple[float | None, list[str], int]:
    """``(t_start, column names, header line count)`` of a monitor CSV's lines.

    ``t_start`` is None without the ``#{...}`` comment line and 0.0 if that line cannot be read.
    """
    t_start, cols, n_header = _header(lines)
    return (0.0 if t_start is None and n_header == 2 else t_start), cols, n_header


def monitor_files(run_dir: str, include_orphaned: bool = False) -> list[str]:
    """The run's own monitor CSVs: ``monitor/*.monitor.csv`` and ``monitor/resume-<k>/*.monitor.csv``.

    Nothing deeper is read: an export kept inside the run dir (``retrokit export RUN RUN/export``) or a run
    nested in it holds copies of these games, and counting them again would double the run. A folder without
    ``monitor/`` (SB3's ``Monitor``, rl-zoo3) is read at its top level. Set-aside logs (``orphaned-<k>/``,
    see progress.py) only if asked.
    """
    roots = [run_dir]
    if include_orphaned:
        roots += glob_in(run_dir, ORPHANED_PREFIX + "*")
    paths: list[str] = []
    for root in roots:
        monitor = os.path.join(root, MONITOR_DIR)
        if not os.path.isdir(monitor):
            folders = [root] if root == run_dir else []
        else:
            segments = glob_in(monitor, "resume-*")
            folders = [monitor, *(s for s in segments if _SEGMENT.fullmatch(os.path.basename(s)))]
        for folder in folders:
            paths += glob_in(folder, f"*{SUFFIX}")
    return sorted(paths)


def _read_lines(path: str) -> list[bytes]:
    """The raw lines of a file, line ends kept (bytes: damage must not stop the reading). OSError if it
    cannot be read."""
    with open(path, "rb") as fh:
        return fh.read().splitlines(keepends=True)


def _decode(line: bytes) -> str | None:
    """A line as text, or None if it is damaged (not UTF-8, or NUL bytes of a file cut by a crash)."""
    if b"\0" in line:
        return None
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def split_monitor_csv(path: str, saved_at: float) -> tuple[list[bytes], list[bytes]]:
    """Raw lines of a monitor CSV: (header + games that ended by ``saved_at``, games that ended later).

    Lines are bytes, so a damaged file is rewritten byte for byte but for the games moved out. OSError if the
    file cannot be read.
    """
    raw = _read_lines(path)
    t_start, cols, n_header = _header([_decode(line) or "" for line in raw[:2]])
    if t_start is None or "t" not in cols:
        return raw, []  # not ours to judge: keep everything
    t_col = cols.index("t")
    kept, later = raw[:n_header], []
    for line in raw[n_header:]:
        text = _decode(line)
        try:
            ended_in_time = text is None or t_start + float(text.split(",")[t_col]) <= saved_at
        except (ValueError, IndexError):
            ended_in_time = True  # malformed lines are kept
        (kept if ended_in_time else later).append(line)
    return kept, later


Game = tuple[float, float, float, float]  # t, r, l, segment_steps (nan: not written)


def _game(line: bytes, cols: list[str]) -> Game | None:
    """``(t, r, l, segment_steps)`` of one row, or None if it is not a row of finite numbers."""
    text = _decode(line)
    if text is None:
        return None
    parts = text.strip().split(",")
    if len(parts) != len(cols):
        return None
    names = ("t", "r", "l", "segment_steps") if "segment_steps" in cols else ("t", "r", "l")
    try:
        values = [float(parts[cols.index(c)]) for c in names]
    except ValueError:
        return None
    if not all(map(math.isfinite, values)):
        return None
    t, r, length, *steps = values
    return t, r, length, steps[0] if steps else math.nan


def _read_one(path: str, warn: list[str]) -> tuple[float | None, list[Game], int]:
    """``(t_start, games (t, r, l, segment_steps), damaged rows)`` of one monitor CSV; a file that cannot be
    read or is not a monitor CSV gives no games and a line in ``warn``."""
    try:
        raw = _read_lines(path)
    except OSError as exc:
        warn.append(f"{path}: cannot be read ({exc.strerror or exc}); skipped")
        return None, [], 0
    if not any(line.strip() for line in raw):
        warn.append(f"{path}: empty (no header line); skipped")
        return None, [], 0
    t_start, cols, n_header = _header([_decode(line) or "" for line in raw[:2]])
    if not {"r", "l", "t"} <= set(cols):
        # the column line is lost but the rows are the kit's: read them as the writer wrote them
        first = raw[n_header - 1] if len(raw) >= n_header else b""
        layout = next((list(c) for c in (DEFAULT_COLUMNS, STEP_COLUMNS) if _game(first, list(c))), None)
        if layout is None:
            warn.append(f"{path}: not a monitor CSV (no r,l,t header line); skipped")
            return None, [], 0
        cols, n_header = layout, n_header - 1
        warn.append(f"{path}: no r,l,t header line; its rows are read as {','.join(layout)}")
    if t_start is None:
        warn.append(f"{path}: no start time in its first line; its games are timed from the run's start")
    games, bad = [], 0
    body = raw[n_header:]
    for i, line in enumerate(body):
        if not line.strip():
            continue
        game = _game(line, cols)
        if game is not None:
            games.append(game)
        elif i < len(body) - 1 or line.endswith(b"\n"):
            bad += 1  # an unfinished last line (no line end) may be being written right now: not counted
    return t_start, games, bad


def read_monitor_csvs(
    run_dir: str, skipped: dict[str, int] | None = None, warnings: list[str] | None = None
) -> dict[str, np.ndarray]:
    """All games of a run (all envs and resumed segments, not set-aside logs), ordered by end time.

    Returns arrays ``r`` (true score), ``l`` (agent steps), ``t`` (seconds since the run started) and
    ``steps`` (cumulative ``l`` of the finished games over all envs: near the run's step count at each game's
    end, not it, as games in flight and games cut short at a resume are missing and the stack's reset steps
    are in). Where every game has its ``segment_steps`` and every segment its start (see the module
    docstring), also ``run_steps``: the run's step count when each game ended, the count of the logger and
    the checkpoints. RunError if the run has no monitor CSV. Damage never raises: rows that are not numbers
    (not UTF-8, NUL bytes, cut short) are left out, a file that cannot be read, is empty or has no r,l,t
    columns is skipped, a file without its start time is timed from the run's start. ``skipped``, if given,
    receives ``{path: number of rows left out}`` (an unfinished last line, being written right now, is not
    counted); ``warnings``, if given, one line per damaged file, naming it.
    """
    files = monitor_files(run_dir)
    if not files:
        raise RunError(f"{run_dir}: no monitor CSVs (*{SUFFIX}); pass a run dir from retrokit train")
    segment_starts = {folder: _segment_start(folder) for folder in {os.path.dirname(path) for path in files}}
    read = []
    for path in files:
        notes: list[str] = []
        t_start, games, bad = _read_one(path, notes)
        if bad:
            notes.append(
                f"{path}: skipped {bad} row(s) that are not numbers (r,l,t); its other games are kept"
            )
            if skipped is not None:
                skipped[path] = bad
        if notes and warnings is not None:  # one line per file
            warnings.append(notes[0] + "".join("; " + n.split(": ", 1)[1] for n in notes[1:]))
        start = segment_starts[os.path.dirname(path)]
        read.append((t_start, [(t, r, n, math.nan if start is None else start + k) for t, r, n, k in games]))
    starts = [t for t, _ in read if t is not None]
    t0 = min(starts) if starts else 0.0
    rows = sorted(
        ((t0 if t_start is None else t_start) + t, r, n, k) for t_start, games in read for t, r, n, k in games
    )
    if not rows:
        return {k: np.zeros(0) for k in ("r", "l", "t", "steps")}
    table = np.asarray(rows)
    games = {"r": table[:, 1], "l": table[:, 2], "t": table[:, 0] - t0, "steps": np.cumsum(table[:, 2])}
    if not np.isnan(table[:, 3]).any():
        games["run_steps"] = table[:, 3].astype(np.int64)
    return games


def agent_steps(games: dict[str, np.ndarray]) -> np.ndarray:
    """The step count at each game's end that a curve is drawn against: the run's own (``run_steps``) where
    :func:`read_monitor_csvs` knows it, else the finished games' (``steps``)."""
    return games.get("run_steps", games["steps"])


def recent_games(run_dir: str, window: int = 100) -> tuple[int, list[tuple[float, float, float]]]:
    """What a resumed segment's logs carry on from: the number of games the run has finished so far and
    the last ``window`` of them as ``(r, l, t)``, read from its monitor CSVs (no CSV: ``(0, [])``).

    Without it the first rows after a resume would average only the new segment's few games, so the
    curve of ``rollout/ep_rew_mean`` and the progress bar's score would jump at every resume.
    """
    try:
        games = read_monitor_csvs(run_dir)
    except RunError:
        return 0, []
    n = len(games["r"])
    columns = (games[k][max(0, n - window) :].tolist() for k in ("r", "l", "t"))
    return n, list(zip(*columns, strict=True))
