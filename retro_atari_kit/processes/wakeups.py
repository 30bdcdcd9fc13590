"""One wake-up for many children: a semaphore per child, a countdown, and one semaphore back.

A pipe round trip per child and per step costs the parent a pickled command, a write, a wait over the
child's pipe and process, a read and an unpickled answer, for every child. :class:`Wakeups` replaces the
round trip for work whose inputs and outputs live in shared memory (the vector env's step): the parent
sets the countdown to the number of children it wakes and wakes each one (``sem_post``); each child, done,
counts down and the last one releases the single ``done`` semaphore the parent waits on. Nothing is
pickled and the parent wakes once.

The pipe stays for everything else. A child waits on its semaphore, not on its pipe, so every message to it
comes with a wake-up that says "read your pipe" (:meth:`Wakeups.wake`, passed as ``wake`` to
:meth:`~retro_atari_kit.processes.ChildProcess.send`: the wake-up happens after the message is pickled and
before it is written, so a message that does not pickle wakes nobody). A child idle on its semaphore looks
at its pipe every :data:`IDLE_CHECK_S`: a message that came without a wake-up is a stop (``stop_all``) or the
end of the pipe (the parent is gone), both read at once, so no child outlives its parent or ignores a stop.

The parent's wait watches the children too: every :data:`DEATH_CHECK_S` without the ``done`` semaphore it
asks each child whether it is alive, so a child that dies mid-work raises its died error within that time,
never a hang. Ctrl-C interrupts the wait (the semaphore wait is interruptible).

Semaphores cross to a child only when it starts: pass :meth:`Wakeups.child` in the child's arguments.
:meth:`Wakeups.close` drops them (named semaphores are unlinked then, not at exit).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

IDLE_CHECK_S = 0.2  # a child on its semaphore looks at its pipe this often (a stop unannounced, no parent)
DEATH_CHECK_S = 0.1  # the parent waiting for the countdown asks the children whether they live this often

_WORK, _PIPE = 1, 2  # what a wake-up means to its child: do the shared-memory work, or read the pipe


class ChildWakeup:
    """Child side of :class:`Wakeups` (picklable only while the child starts)."""

    def __init__(self, rank: int, semaphore: Any, codes: Any, left: Any, done: Any):
        self.rank, self._semaphore, self._codes, self._left, self._done = rank, semaphore, codes, left, done

    def wait(self, conn: Connection) -> tuple | None:
        """Block until woken: None means "do the work, then :meth:`finished`"; else the pipe message
        ``(command, data)`` to handle. EOF on the pipe (the parent is gone) raises ``EOFError``."""
        semaphore = self._semaphore
        while not semaphore.acquire(True, IDLE_CHECK_S):
            # the parent wakes a child before it writes: a message here with no wake-up waiting came without
            # one
            if conn.poll() and not semaphore.acquire(False):
                return conn.recv()
        if self._codes[self.rank] == _PIPE:
            return conn.recv()
        return None

    def finished(self) -> None:
        """Count this child's work done; the last child of the round releases the parent."""
        with self._left.get_lock():
            self._left.value -= 1
            last = self._left.value == 0
        if last:
            self._done.release()


class Wakeups:
    """Parent side: wake ``n`` children at once and wait for all of them (see the module docstring)."""

    def __init__(self, n: int, context: str | BaseContext):
        ctx = mp.get_context(context) if isinstance(context, str) else context
        self._semaphores = [ctx.Semaphore(0) for _ in range(n)]
        self._codes = ctx.RawArray("b", n)
        self._left = ctx.Value("q", 0)
        self._count = self._left.get_obj()  # set between rounds only, when no child counts down: no lock
        self._done = ctx.Semaphore(0)
        self.closed = False

    def child(self, rank: int) -> ChildWakeup:
        """What child ``rank`` needs: pass it in the child's start arguments."""
        return ChildWakeup(rank, self._semaphores[rank], self._codes, self._left, self._done)

    def start(self, ranks: Sequence[int]) -> None:
        """Wake ``ranks`` for one round of work; :meth:`wait` returns when each has called ``finished``."""
        codes, semaphores = self._codes, self._semaphores
        self._count.value = len(ranks)
        for rank in ranks:
            codes[rank] = _WORK
        for rank in ranks:
            semaphores[rank].release()

    def wake(self, rank: int) -> None:
        """Wake ``rank`` to read its pipe (call just before writing the message, or pass as ``wake``)."""
        if not self.closed:
            self._codes[rank] = _PIPE
            self._semaphores[rank].release()

    def wait(self, children: Iterable[Any]) -> None:
        """Wait for the round started by :meth:`start`; a child found dead meanwhile raises its died error
        (``children`` have ``raise_if_dead()``, e.g. :class:`~retro_atari_kit.processes.ChildProcess`)."""
        done = self._done
        while not done.acquire(True, DEATH_CHECK_S):
            for child in children:
                child.raise_if_dead()

    def close(self) -> None:
        """Drop the semaphores (named ones are unlinked as they go). Idempotent."""
        self.closed = True
        self._semaphores, self._left, self._count, self._done = [], None, None, None
