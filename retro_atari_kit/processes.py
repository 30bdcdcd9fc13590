"""Helpers shared by everything that hosts work in child processes (vector workers, the retro env worker,
the SB3 play process): a start method that never copies the parent's emulator, exceptions that survive a
pipe, and a bounded stop that never hangs."""

from __future__ import annotations

import multiprocessing as mp
import pickle


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
