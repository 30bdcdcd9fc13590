"""How many threads torch's intra-op pool gets: the one rule for every command and engine of the kit.

torch's OpenMP threads wait for each other by spinning at the end of every parallel region. When the
cores are shared (env workers of the same run, other jobs on the machine), a spinning thread holds a core
that an env worker or another job needs, and a region ends only when its slowest thread, descheduled,
comes back: small forwards then take many times longer than on one thread (docs/install.md, "Shared
machines and thread counts", has the measurements). But a learner that keeps fewer threads than the free
cores while nothing else runs only loses: so the count follows what runs beside torch, phase by phase.

- **playing** (``retrokit eval``, ``retrokit record``, periodic evaluation): one thread. A batch of one
  to a few frames through a small CNN gains nothing from more (:func:`playing_threads`).
- **learning with nothing beside it** (PPO / A2C's update phase): every free core.
- **acting while env workers step** (the rollout phase): env workers that step while the learner *waits*
  for them (SB3's synchronous ``step``) leave one thread to torch plus the cores they do not take, since
  the waiting caller's thread holds no core and only torch's other threads spin:
  ``max(1, free cores - workers + 1)``; so DQN with one env keeps every free core. Workers that run *while*
  torch computes (a play process beside the trainer, RLlib's env runners) leave ``free - workers``.
- **free cores** are the usable cores (``os.sched_getaffinity``: a container's or ``taskset``'s limit, not
  the machine's count) less those other processes kept busy when the run started (:func:`busy_elsewhere`,
  measured once; a loaded machine therefore learns on the threads its idle cores allow).
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
    "PhaseThreads",
    "busy_elsewhere",
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
    cores: int,
    workers: int = 0,
    current: int | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    busy: float = 0.0,
    synchronous: bool = False,
) -> int | None:
    """The rule: torch threads for a process that may use ``cores`` CPUs, ``busy`` of them kept busy by
    other processes, beside ``workers`` env workers (processes or emulator threads), with ``current``
    threads now.

    None means "leave torch as it is" (the user set ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``). Otherwise,
    with ``free = max(1, cores - round(busy))``: ``max(1, free - workers)`` when the workers run while torch
    computes; ``max(1, free - workers + 1)`` when they step only while the caller waits for them
    (``synchronous``: the caller's thread then holds no core, only torch's other threads spin); ``free``
    with no workers. Capped at ``current`` (a smaller count the user chose stays), never below 1.
    """
    if cores < 1 or workers < 0 or (current is not None and current < 1) or not busy >= 0:
        raise ValueError(
            "need cores >= 1, workers >= 0, current >= 1, busy >= 0; "
            f"got {cores}, {workers}, {current}, {busy}"
        )
    if user_thread_setting(environ) is not None:
        return None
    free = max(1, cores - round(busy))
    beside = max(0, workers - 1) if synchronous else workers
    threads = max(1, free - beside)
    return threads if current is None else min(threads, current)


def busy_elsewhere(interval: float = 0.2) -> float:
    """How many of this process's usable cores other processes keep busy, measured over ``interval``
    seconds (CPU time of those cores less this process's and its children's, per second of wall time).

    0.0 where the OS gives no per-CPU times. Call it while this process is idle (before training): what it
    measures is the load the run will share the cores with.
    """
    import time

    import psutil

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    me = psutil.Process()

    def busy_and_own() -> tuple[float, float]:
        per_cpu = psutil.cpu_times(percpu=True)
        chosen = [per_cpu[i] for i in cpus if i < len(per_cpu)] if cpus is not None else per_cpu
        busy = sum(t.user + t.system + getattr(t, "nice", 0.0) for t in chosen)
        own = 0.0
        for proc in [me, *me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                own += times.user + times.system
        return busy, own

    try:
        busy0, own0 = busy_and_own()
        start = time.perf_counter()
        time.sleep(interval)
        busy1, own1 = busy_and_own()
        wall = time.perf_counter() - start
    except (OSError, psutil.Error, IndexError):
        return 0.0
    return max(0.0, (busy1 - busy0) - (own1 - own0)) / max(wall, 1e-6)


def learner_threads(workers: int, *, synchronous: bool = False, busy: float = 0.0) -> int:
    """Apply the rule to torch for a learner beside ``workers`` env workers; returns the count in force."""
    import torch

    threads = choose_threads(
        usable_cores(), workers, torch.get_num_threads(), busy=busy, synchronous=synchronous
    )
    if threads is not None and threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return torch.get_num_threads()


class PhaseThreads:
    """torch's thread count for a learner that alternates between acting (env workers step) and learning
    (nothing else of the run runs): :meth:`acting` and :meth:`learning` set the rule's count for each
    phase, :meth:`restore` puts back the count torch had at construction.

    The ceiling is the count torch has at construction (the rule only lowers); the load of other processes
    is measured once there (:func:`busy_elsewhere`, ``measure=False`` to skip it). With
    ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` set nothing is ever changed.
    """

    def __init__(self, workers: int, *, synchronous: bool = True, measure: bool = True) -> None:
        import torch

        self.ceiling = torch.get_num_threads()
        self.busy = busy_elsewhere() if measure and user_thread_setting() is None else 0.0
        cores = usable_cores()
        self.acting_threads = choose_threads(
            cores, workers, self.ceiling, busy=self.busy, synchronous=synchronous
        )
        self.learning_threads = choose_threads(cores, 0, self.ceiling, busy=self.busy)

    @staticmethod
    def _set(threads: int | None) -> int:
        import torch

        if threads is not None and threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        return torch.get_num_threads()

    def acting(self) -> int:
        """The count while env workers step (the rollout phase); returns the count in force."""
        return self._set(self.acting_threads)

    def learning(self) -> int:
        """The count while only the learner runs (the update phase); returns the count in force."""
        return self._set(self.learning_threads)

    def restore(self) -> int:
        """Back to the count torch had at construction."""
        return self._set(None if user_thread_setting() is not None else self.ceiling)

    def describe(self) -> str:
        """One line for the run's output: the counts of both phases and why."""
        setting = user_thread_setting()
        if setting is not None:
            return f"torch threads: {self.ceiling} ({setting} set: the kit leaves torch alone)"
        load = ""
        if self.busy >= 0.5:
            load = f"; other processes kept {self.busy:.1f} of {usable_cores()} cores busy"
        acting, learning = self.acting_threads, self.learning_threads
        return f"torch threads: {acting} while envs step, {learning} while learning{load}"


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
