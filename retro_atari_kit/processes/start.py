"""How a child process starts and ends: a start method that never copies the parent's emulator, stop
signals that reach only the parent, what to tell the user when a child dies while starting, exceptions that
survive a pipe, and a bounded stop."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import signal
import sys
from collections.abc import Iterator

# What a terminal, systemd, Slurm or `kill -TERM -PGID` sends to stop a job: often to every process of the
# group (or cgroup) at once. Only the kit's main process acts on them: it saves a checkpoint while its
# children keep serving, then closes them. A child ignores them; it still ends when its parent does (EOF on
# its pipe).
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_HAVE_SIGMASK = hasattr(signal, "pthread_sigmask")


def default_start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn``: a forked child would inherit the parent's
    emulator state (stable-retro allows one per process) and threads."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


@contextlib.contextmanager
def stop_signals_blocked(start_method: str | None = None) -> Iterator[None]:
    """Start children inside this block: the stop signals are blocked in the calling thread, so a child
    (and the forkserver this may start) is born with them blocked and cannot die of one before
    :func:`ignore_stop_signals` runs in it; that happens first thing in the child, however long its
    interpreter takes to start. A program that never unblocks them (Ray's processes) never gets them.

    Nothing is lost in this process: a signal sent meanwhile is handled by another thread, or stays pending
    until the block ends and is handled then. The resource tracker a ``forkserver`` / ``spawn`` start
    (``start_method``; None: no multiprocessing child) may launch unblocks SIGINT and SIGTERM when it is
    done, so it is launched here first (it ignores them itself).
    """
    if not _HAVE_SIGMASK:
        yield
        return
    if start_method in ("forkserver", "spawn"):
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        if start_method == "forkserver":  # its server forks every later child: born with the signals blocked
            from multiprocessing import forkserver

            forkserver.ensure_running()
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def ignore_stop_signals() -> None:
    """Child side: ignore the stop signals (the parent handles them and closes its children), then unblock
    them (one that arrived while the child started is discarded)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if _HAVE_SIGMASK:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def picklable_exception(exc: BaseException) -> BaseException:
    """``exc`` itself if it can cross a pipe, else a RuntimeError carrying its type name and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def end_process(proc: mp.process.BaseProcess, grace: float = 1.0) -> None:
    """Join ``proc`` for ``grace`` seconds, then terminate, then kill it; every wait is bounded."""
    proc.join(grace)
    if proc.is_alive():
        proc.terminate()
        proc.join(grace)
    if proc.is_alive():
        proc.kill()
        proc.join(5.0)


def unreadable_main_script() -> str | None:
    """The path a ``forkserver``/``spawn`` child would re-import the main script from, when it cannot:
    a script read from standard input (``python - < script.py``) has ``__file__ == "<stdin>"``, which
    multiprocessing turns into a path that does not exist. None when the child can re-import it (a file,
    ``python -m``) or has nothing to re-import (``python -c``, a REPL, a notebook)."""
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return None
    path = getattr(main, "__file__", None)
    if path is None or os.path.isfile(path):
        return None
    return path


def worker_start_hint(start_method: str) -> str:
    """Why a worker most likely died while starting, and what to do, as one clause to append to an error
    ("... while starting. <hint>"). Workers of ``forkserver``/``spawn`` start by re-importing the main
    script: from a file without a main guard that re-runs the code making envs; from standard input it
    is impossible, guard or not."""
    if start_method == "fork":
        return "(the worker's traceback is printed above)"
    script = unreadable_main_script()
    if script is not None:
        return (
            f"With start method {start_method!r} every worker first re-imports your main script, and yours "
            f"was read from {script} (e.g. `python - < script.py`), which a worker cannot read again: save "
            "the script to a file and run it as `python script.py`"
        )
    return (
        f"With start method {start_method!r} every worker first re-imports your main script: put the code "
        'that creates envs under `if __name__ == "__main__":` (the worker\'s traceback is printed above)'
    )
