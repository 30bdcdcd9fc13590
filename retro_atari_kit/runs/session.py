"""The life cycle every engine's ``train`` shares: stop signals, the lock, the start of a resumed segment,
and what is left when a run ends before its first checkpoint.

::

    with training_session(run_dir, new_run=resume_from is None) as stop:
        segment = begin_segment(run_dir, steps, saved_at) if resume_from else 0
        ...build envs and the model...
        stop.raise_if_requested("interrupted before training started")
        ...train until done or stop.requested, then save a checkpoint...
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from retro_atari_kit.errors import RunError
from retro_atari_kit.runs.checkpoints import list_checkpoints
from retro_atari_kit.runs.layout import monitor_dir, remove_new_run_dir, resume_segment
from retro_atari_kit.runs.lock import RunLock
from retro_atari_kit.runs.monitor import write_segment_start
from retro_atari_kit.runs.progress import merge_progress, set_aside_orphaned_logs
from retro_atari_kit.runs.stop import StopRequest, StopRequested, stop_signals

Print = Callable[[str], None]


@contextlib.contextmanager
def training_session(run_dir: str, new_run: bool, out: Print = print) -> Iterator[StopRequest]:
    """Hold ``run_dir``'s lock and catch stop signals for the block; yields the stop request.

    A new run that ends in any way (an error, a stop before training started) without a checkpoint is
    removed, with the folders above it that this process made for it: nothing of value was saved, and a
    left-over dir would make the same command fail with "exists". Only a dir this process made is removed
    (``layout.create_run_dir``): a resumed run, also one resumed from its start (``new_run`` with a dir made
    earlier), is never removed. A RunError for a lock held by another process removes nothing.
    """
    with stop_signals() as stop, RunLock(run_dir):
        try:
            yield stop
        except BaseException as exc:
            removed = new_run and not _has_checkpoint(run_dir) and remove_new_run_dir(run_dir)
            if removed:
                out(f"nothing was saved; removed {run_dir}")
            elif isinstance(exc, StopRequested):
                out(f"{run_dir} is as it was; resume with: retrokit train --resume {run_dir}")
            raise


def _has_checkpoint(run_dir: str) -> bool:
    try:
        return bool(list_checkpoints(run_dir))
    except RunError:  # checkpoints/ cannot be listed: something may be saved there, so it is kept
        return True


def begin_segment(run_dir: str, steps: int, saved_at: float, out: Print = print) -> int:
    """Start the next resumed segment of ``run_dir`` (under its lock); returns the segment number.

    Merges the progress parts of earlier segments and sets aside logs written past the checkpoint the
    resume starts from (``steps`` agent steps, written at ``saved_at``), printing what it did, and records
    ``steps`` as the new segment's start in its monitor folder (``monitor.write_segment_start``).
    """
    segment = resume_segment(run_dir)
    for note in (merge_progress(run_dir), set_aside_orphaned_logs(run_dir, steps, saved_at)):
        if note:
            out(note)
    write_segment_start(monitor_dir(run_dir, segment), steps)
    return segment
