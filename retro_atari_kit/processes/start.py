"""How a child process starts and ends: a start method that never copies the parent's emulator, what to
tell the user when a child dies while starting, exceptions that survive a pipe, and a bounded stop."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys


def default_start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn``: a forked child would inherit the parent's
    emulator state (stable-retro allows one per process) and threads."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


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
