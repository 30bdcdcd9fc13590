"""What an RLlib training iteration leaves in the run dir: monitor CSV rows, a progress row, tensorboard
scalars and a log line, in the same files and column names as the SB3 engine (so ``retrokit plot`` and
anything reading SB3's ``progress.csv`` work unchanged).

The files themselves (monitor CSV format, progress part files, merging) are the run layer's
(``retro_atari_kit.runs``); this module only maps an RLlib result dict onto them.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from retro_atari_kit.integrations.rllib.callbacks import GAMES, TRUE_SCORE

from retro_atari_kit.csv_cells import csv_row
from retro_atari_kit.runs import MonitorCSV, monitor_dir, progress_path, recent_games

WINDOW = 100  # games averaged by rollout/ep_rew_mean and ep_len_mean, as SB3's default stats window

# (progress.csv column, path in RLlib's result dict). SB3's names where the meaning is the same:
# rollout/ep_rew_mean is the TRUE score (all lives, unclipped), as the kit's SB3 runs log it.
COLUMNS: list[tuple[str, tuple[str, ...]]] = [
    ("time/total_timesteps", ()),
    ("time/iterations", ("training_iteration",)),
    ("time/time_elapsed", ()),
    ("time/fps", ()),
    ("rollout/ep_rew_mean", ()),  # last 100 games, as SB3's
    ("rollout/ep_len_mean", ()),
    ("rollout/games", ()),
    ("rllib/true_score_mean", ("env_runners", TRUE_SCORE)),  # per runner, last 100 of its games
    ("rllib/episode_return_mean", ("env_runners", "episode_return_mean")),  # one life, clipped
    ("rllib/episode_len_mean", ("env_runners", "episode_len_mean")),
    ("train/loss", ("learners", "default_policy", "total_loss")),
    ("train/policy_loss", ("learners", "default_policy", "policy_loss")),
    ("train/value_loss", ("learners", "default_policy", "vf_loss")),
    ("train/entropy", ("learners", "default_policy", "entropy")),
    ("train/qf_loss", ("learners", "default_policy", "qf_loss")),
    ("train/learning_rate", ("learners", "default_policy", "default_optimizer_learning_rate")),
]

__all__ = ["COLUMNS", "RunLogger", "finished_games", "lookup", "ray_messages_into"]


@contextlib.contextmanager
def ray_messages_into(path: str) -> Iterator[bool]:
    """For the block, file descriptor 2 of this process is appended to ``path`` (the run's ``log.txt``).

    Ray writes its own warnings there, not only through Python's ``logging``: its C++ core worker logs to
    fd 2, and the lines of the env runners (other processes) are printed by the driver's log monitor. None
    of them is for the user of ``retrokit train`` (deprecations inside RLlib, token authentication, gputil),
    so they all go to the run's log, and the terminal keeps the kit's lines (on stdout) and, after the
    block, its one error line. Yields whether the messages go there: not when fd 2 is closed or the file
    cannot be opened (then they are shown as before)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # stderr closed: nothing to keep clean, and nothing to restore
        yield False
        return
    try:
        log = open(path, "a", encoding="utf-8")  # noqa: SIM115 - its descriptor is what fd 2 becomes
    except OSError:
        os.close(saved)
        yield False
        return
    with log:
        log.write(f"---- Ray's own messages, {time.strftime('%Y-%m-%d %H:%M:%S')} ----\n")
        log.flush()
        os.dup2(log.fileno(), 2)
    try:
        yield True
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def lookup(result: dict[str, Any], path: tuple[str, ...]) -> Any:
    """``result[path[0]][path[1]]...`` or None."""
    node: Any = result
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def finished_games(result: dict[str, Any]) -> list[tuple[int, float, int]]:
    """The ``(rank, score, length)`` games of an iteration. RLlib's item series reduces a one-item list to
    the item itself, so a single finished game arrives as a bare tuple."""
    games = lookup(result, ("env_runners", GAMES))
    if not games:
        return []
    if not isinstance(games[0], (list, tuple)):
        games = [games]
    return [(int(rank), float(score), int(length)) for rank, score, length in games]


def _number(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


class RunLogger:
    """Writes one segment's logs (segment 0: the first run; k: the k-th resume) into ``run_dir``."""

    def __init__(self, run_dir: str, env_id: str, num_envs: int, segment: int, start_steps: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.monitor = MonitorCSV(monitor_dir(run_dir, segment), env_id, num_envs)
        self.num_envs = num_envs
        self.path = progress_path(run_dir, segment)
        self._csv = open(self.path, "w", newline="", encoding="utf-8")  # noqa: SIM115  (kept for the run)
        self._writer = csv.writer(self._csv)
        self._writer.writerow(csv_row(c for c, _ in COLUMNS))
        self._csv.flush()
        self._log = open(os.path.join(run_dir, "log.txt"), "a", encoding="utf-8")  # noqa: SIM115
        self._tb = SummaryWriter(log_dir=run_dir)
        # a resumed segment goes on from the run's games so far: its first rows average the last 100 games
        # of the run, not its own few, and the count of games keeps counting
        self.games, recent = recent_games(run_dir, WINDOW) if segment else (0, [])
        self.recent: deque[tuple[float, int]] = deque(((r, int(n)) for r, n, _ in recent), maxlen=WINDOW)
        self._t0 = time.time()
        self._last = (self._t0, start_steps)

    def log(self, result: dict[str, Any], steps: int) -> dict[str, Any]:
        """Record one iteration's result at ``steps`` total env steps; returns the progress row."""
        for rank, score, length in finished_games(result):
            # a runner restarted with more envs than configured must not crash the run: fold its ranks in
            self.monitor.write(rank % self.num_envs, score, length)
            self.recent.append((score, length))
            self.games += 1
        now = time.time()
        fps = (steps - self._last[1]) / max(now - self._last[0], 1e-9)
        self._last = (now, steps)
        row: dict[str, Any] = {}
        for column, path in COLUMNS:
            row[column] = _number(lookup(result, path)) if path else None
        row.update(
            {
                "time/total_timesteps": steps,
                "time/time_elapsed": round(now - self._t0, 3),
                "time/fps": round(fps, 1),
                "rollout/games": self.games,
            }
        )
        if self.recent:
            row["rollout/ep_rew_mean"] = sum(r for r, _ in self.recent) / len(self.recent)
            row["rollout/ep_len_mean"] = sum(n for _, n in self.recent) / len(self.recent)
        self._writer.writerow(csv_row("" if row[c] is None else row[c] for c, _ in COLUMNS))
        self._csv.flush()
        for column, value in row.items():
            if value is not None and column != "time/total_timesteps":
                self._tb.add_scalar(column, value, steps)
        score = row["rollout/ep_rew_mean"]
        self._log.write(
            f"iter {row['time/iterations']} steps {steps} fps {row['time/fps']:.0f} games {self.games} "
            f"true_score_mean {'n/a' if score is None else f'{score:.2f}'}\n"
        )
        self._log.flush()
        return row

    def close(self) -> None:
        """Flush and close every file. Idempotent."""
        self.monitor.close()
        for handle in (self._csv, self._log):
            if not handle.closed:
                handle.close()
        self._tb.close()
