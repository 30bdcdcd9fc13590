"""The lock of a run dir: one training process per run, and nobody clears or resumes a live run.

The lock is a kernel lock on ``.train.pid`` (a POSIX ``fcntl`` record lock; ``msvcrt.locking`` on
Windows), not the file's existence:

- taking it is atomic, so of two commands started at the same moment exactly one gets it;
- the kernel drops it when its process ends, however it ends (SIGKILL, OOM, power loss), so a dead run never
  blocks a later ``--resume``; a ``.train.pid`` nobody holds is stale whatever pid it names (pids are
  reused, and an unrelated process that got the same pid holds no lock);
- record locks belong to a process and are not inherited by forked children, so an env worker that
  outlives a killed trainer does not keep the run locked.

The file names the holder (``<pid> <process start time>``) for the messages only. One process may take
the lock of a run more than once (``RunLock`` is re-entrant): the CLI takes it before it reads or writes
anything of a run it resumes, and the engine's ``train`` takes it again. Because a record lock is dropped
when its process closes *any* descriptor of the file, this module is the only code that opens it.
"""

from __future__ import annotations

import os
import time
from types import TracebackType

from retro_atari_kit.errors import RunError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".train.pid"

# realpath of a lock file -> [descriptor, depth] for the locks this process holds
_held: dict[str, list[int]] = {}


def _key(path: str) -> str:
    return os.path.realpath(path)


def _try_lock(fd: int) -> bool:
    """Take the kernel lock on ``fd`` without waiting; False if another process holds it."""
    try:
        if fcntl is not None:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            import msvcrt

            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.lockf(fd, fcntl.LOCK_UN)
    else:
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def _start_time(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return 0.0


def _read_pid(path: str) -> int | None:
    """The pid a held lock file names; None if it cannot be read (its holder is writing it right now)."""
    for _ in range(50):
        try:
            with open(path, encoding="utf-8") as fh:
                return int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            time.sleep(0.01)
    return None


def lock_owner(run_dir: str) -> int | None:
    """pid of another live process that holds ``run_dir``'s lock, else None (no lock, stale, or ourselves).

    A held lock whose file names no readable pid reports ``-1``.
    """
    path = os.path.join(run_dir, LOCK_FILE)
    if _key(path) in _held or not os.path.exists(path):
        return None
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    except PermissionError:  # another user's run: judge by its pid and start time
        return _owner_from_contents(path)
    try:
        if _try_lock(fd):
            _unlock(fd)
            return None
    finally:
        os.close(fd)
    pid = _read_pid(path)
    return -1 if pid is None else pid


def _owner_from_contents(path: str) -> int | None:
    try:
        with open(path, encoding="utf-8") as fh:
            fields = fh.read().split()
        pid, started = int(fields[0]), float(fields[1]) if len(fields) > 1 else None
    except (OSError, ValueError, IndexError):
        return None
    actual = _start_time(pid)
    if not actual or (started is not None and abs(actual - started) > 1.0):
        return None  # gone, or the pid now names another process
    return pid


def describe_owner(pid: int) -> str:
    """``pid N`` for the messages (``another process`` when the lock file names none)."""
    return f"pid {pid}" if pid > 0 else "another process"


def stop_hint(pid: int) -> str:
    """How to stop the holder so that it saves a checkpoint."""
    return f"kill -TERM {pid} saves a checkpoint" if pid > 0 else "Ctrl-C or SIGTERM saves a checkpoint"


class RunLock:
    """``with RunLock(run_dir):`` holds the lock for the block; RunError if another process holds it.

    Re-entrant within a process: the lock is released when the outermost block ends.
    """

    def __init__(self, run_dir: str) -> None:
        self.path = os.path.join(run_dir, LOCK_FILE)
        self.run_dir = run_dir

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock (or one more level of it); RunError naming the holder if it is taken."""
        key = _key(self.path)
        if key in _held:
            _held[key][1] += 1
            return
        # a few tries: another process may hold the lock for a moment only to test it (lock_owner), or
        # may have just removed the file we opened
        for attempt in range(20):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if _try_lock(fd):
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(self.path))
                except FileNotFoundError:
                    same = False
                if same:
                    break
                # we locked a file its last holder unlinked while releasing: take the new one
                _unlock(fd)
            os.close(fd)
            if attempt < 19:
                time.sleep(0.01)
        else:
            owner = lock_owner(self.run_dir) or -1
            raise RunError(
                f"{self.run_dir} is still training ({describe_owner(owner)}); stop it first "
                f"({stop_hint(owner)})"
            )
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()} {_start_time(os.getpid())}\n".encode())
        _held[key] = [fd, 1]

    def release(self) -> None:
        """Give up one level of the lock; the outermost removes the file and unlocks. Idempotent."""
        key = _key(self.path)
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[key]
        fd = entry[0]
        try:
            try:
                if os.path.samestat(os.fstat(fd), os.stat(self.path)):
                    os.remove(self.path)  # removed while still locked: nobody can take a dying file
            except OSError:
                pass
            _unlock(fd)
        finally:
            os.close(fd)
