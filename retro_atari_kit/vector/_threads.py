"""Which threads the native backend's C++ emulators are, and the scheduling policy they run under.

ale-py starts one C++ thread per single-env ``AtariVectorEnv`` and does not name it, so the kit finds them
as the threads that appear in the process while the cores are built (:func:`started_threads`), and puts
them under Linux's ``SCHED_BATCH`` (:func:`schedule_as_batch`): a woken emulator then does not preempt the
Python thread that woke it, which is still sending the other envs' actions or warping a frame. The policy
only changes which runnable thread the kernel picks, never what a thread computes, so frames and seeds stay
exact. No privilege is needed; elsewhere (no ``/proc``, no ``SCHED_BATCH``) nothing changes. A thread that
another part of the process starts in the same moment is batched too, which is harmless for the same reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def _thread_ids() -> set[int]:
    try:
        return {int(tid) for tid in os.listdir("/proc/self/task")}
    except OSError:
        return set()


@contextmanager
def started_threads() -> Iterator[set[int]]:
    """The IDs of the threads started in this process inside the ``with`` block (filled on exit)."""
    before = _thread_ids()
    started: set[int] = set()
    try:
        yield started
    finally:
        started |= _thread_ids() - before


def schedule_as_batch(tids: set[int]) -> None:
    """Put ``tids`` under ``SCHED_BATCH``; a thread that is gone or refuses stays as it was."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return
    for tid in tids:
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        except OSError:
            pass
