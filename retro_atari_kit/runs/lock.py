"""The pid lock of a run dir: one training process per run, and nobody clears or resumes a live run.

``.train.pid`` holds the pid of the process training the run. A lock whose process is gone (killed,
crashed) is stale and ignored, so a hard kill never blocks a later ``--resume``.
"""

from __future__ import annotations

import os
from types import TracebackType

from retro_atari_kit.runs.errors import RunError
from retro_atari_kit.runs.files import atomic_write_text

LOCK_FILE = ".train.pid"


def lock_owner(run_dir: str) -> int | None:
    """pid of another live process holding ``run_dir``'s lock, else None (no lock, stale, or ourselves)."""
    try:
        with open(os.path.join(run_dir, LOCK_FILE)) as fh:
            pid = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, owned by another user
        return pid
    return pid


class RunLock:
    """``with RunLock(run_dir):`` holds the lock for the block; RunError if a live process holds it."""

    def __init__(self, run_dir: str) -> None:
        self.path = os.path.join(run_dir, LOCK_FILE)
        self.run_dir = run_dir

    def __enter__(self) -> RunLock:
        owner = lock_owner(self.run_dir)
        if owner is not None:
            raise RunError(
                f"{self.run_dir} is being trained by pid {owner}; stop it first "
                f"(kill -TERM {owner} saves a checkpoint)"
            )
        atomic_write_text(self.path, str(os.getpid()))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def release(self) -> None:
        """Remove the lock file if it is still ours. Idempotent."""
        try:
            with open(self.path) as fh:
                mine = fh.read().strip() == str(os.getpid())
            if mine:
                os.remove(self.path)
        except OSError:
            pass
