"""How many threads torch's intra-op pool gets: the one rule for every command and engine of the kit.

torch's OpenMP threads wait for each other by spinning at the end of every parallel region. When the
cores are shared (env workers of the same run, other jobs on the machine), a spinning thread holds a core
that an env worker or another job needs, and a region ends only when its slowest thread, descheduled,
comes back: small forwards then take many times longer than on one thread (docs/install.md, "Shared
machines and thread counts", has the measurements). So:

- **playing** (``retrokit eval``, ``retrokit record``, periodic evaluation): one thread. A batch of one
  to a few frames through a small CNN gains nothing from more (:func:`playing_threads`).
- **learning beside env workers**: ``max(1, usable cores - env workers)`` threads, and never more than
  torch has now (:func:`learner_threads`), where usable cores are those this process may run on
  (``os.sched_getaffinity``: a container's or ``taskset``'s limit, not the machine's count).
- **the user's choice wins**: with ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` set in the environment, the
  kit never changes torch's thread count; a smaller ``torch.set_num_threads`` made before training is kept
  (the rule only lowers).

:func:`choose_threads` is the rule on plain numbers (tested as such); the other functions apply it to
torch, which is imported only when they run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

__all__ = [
    "PLAYING_THREADS",
    "THREAD_ENV_VARS",
    "choose_threads",
    "learner_threads",
    "playing_threads",
    "usable_cores",
    "user_thread_setting",
]

# environment variables through which a user sets torch's (OpenMP / MKL) thread count themselves
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# torch threads while an agent plays: its forwards are a batch of one to a few frames
PLAYING_THREADS = 1


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def user_thread_setting(environ: Mapping[str, str] | None = None) -> str | None:
    """``"OMP_NUM_THREADS=4"`` when the user set a thread count in the environment, else None.

    Any non-empty value counts (torch reads it at start-up; the kit leaves whatever it made of it)."""
    env = os.environ if environ is None else environ
    for name in THREAD_ENV_VARS:
        value = env.get(name, "").strip()
        if value:
            return f"{name}={value}"
    return None


def choose_threads(
    cores: int, workers: int = 0, current: int | None = None, environ: Mapping[str, str] | None = None
) -> int | None:
    """The rule: torch threads for a process that may use ``cores`` CPUs beside ``workers`` busy env
    workers (processes or emulator threads that run while torch computes), with ``current`` threads now.

    None means "leave torch as it is" (the user set ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``). Otherwise
    ``max(1, cores - workers)``, capped at ``current`` (a smaller count the user chose stays) and never
    below 1.
    """
    if cores < 1 or workers < 0 or (current is not None and current < 1):
        raise ValueError(f"need cores >= 1, workers >= 0, current >= 1; got {cores}, {workers}, {current}")
    if user_thread_setting(environ) is not None:
        return None
    threads = max(1, cores - workers)
    return threads if current is None else min(threads, current)


def learner_threads(workers: int) -> int:
    """Apply the rule to torch for a learner beside ``workers`` env workers; returns the count in force."""
    import torch

    threads = choose_threads(usable_cores(), workers, torch.get_num_threads())
    if threads is not None and threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return torch.get_num_threads()


@contextlib.contextmanager
def playing_threads() -> Iterator[int]:
    """torch on one thread while an agent plays (batch-1 forwards), the previous count restored after;
    untouched when the user set ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``. Yields the count in force."""
    import torch

    before = torch.get_num_threads()
    threads = None if user_thread_setting() is not None else PLAYING_THREADS
    if threads is None or threads == before:
        yield before
        return
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)
