"""Stop requests: what Ctrl-C (SIGINT), SIGTERM and SIGHUP do to a training command, for every engine.

While a ``stop_signals()`` block is active, these signals only set a flag (:class:`StopRequest`); nothing is
cut short in the middle of a write. SIGTERM is how systemd, Slurm's ``scancel`` and ``kill -TERM -PGID`` stop
a job, often sent to every process of the group at once: the kit's child processes ignore it (see
``retro_atari_kit.processes``), so the envs keep serving while this process saves, and are closed after.
SIGHUP (the terminal was closed) stops the run the same way, unless it was ignored when the block began
(``nohup``). Output that can no longer be written (stdout or stderr closed with ``>&-``, a reader that went
away, a terminal that closed) never fails the run: see :func:`tolerate_lost_output`. The code that owns the
run decides what the request means where it reads it:

- before the run dir exists (validation): nothing is written, the command ends (exit 130 / 143);
- after the run dir exists but before training started (envs, model, Ray being built): the start is
  abandoned; a new run's dir is removed (nothing of value was saved), a resumed run is left as it was;
- once training runs: training ends at the next step or iteration, a checkpoint is saved, exit 0.

A second signal sets the same flag again, so it waits for the checkpoint being saved instead of leaving a
half-written one and a stale lock. Signals can only be caught in the main thread; elsewhere the block
yields a request no signal sets.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def _take_over(sig: int) -> bool:
    """Whether the block catches ``sig``: always SIGINT and SIGTERM; SIGHUP unless it is ignored (``nohup``
    asked for the command to outlive its terminal)."""
    return sig != getattr(signal, "SIGHUP", None) or signal.getsignal(sig) is not signal.SIG_IGN


class StopRequested(KeyboardInterrupt):
    """A stop request that ended a command before training started; ``signum`` is the signal."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's convention for a command ended by a signal: 128 + its number."""
        return 128 + int(self.signum)


class StopRequest:
    """Set by SIGINT / SIGTERM / SIGHUP while a :func:`stop_signals` block is active."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._installed: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """True once a stop signal arrived."""
        return self.signum is not None

    def __call__(self, signum: int, frame: Any) -> None:  # the signal handler
        if self.signum is None:
            self.signum = signum

    def request(self, signum: int = signal.SIGINT) -> None:
        """Record a stop request that came another way (a library that turned SIGTERM into an exit)."""
        self(signum, None)

    def raise_if_requested(self, what: str) -> None:
        """StopRequested(``what``) if a stop was requested: for the points before training has started."""
        if self.signum is not None:
            raise StopRequested(what, self.signum)

    def reinstall(self) -> None:
        """Take the signals back after a library replaced the handlers (``ray.init`` sets its own SIGTERM)."""
        for sig in self._installed:
            signal.signal(sig, self)


_active: list[StopRequest] = []  # the request of the outermost active block, if any


@contextlib.contextmanager
def stop_signals() -> Iterator[StopRequest]:
    """Catch SIGINT / SIGTERM / SIGHUP for the block and yield the :class:`StopRequest` they set; lost
    output is tolerated for the block (:func:`tolerate_lost_output`).

    Re-entrant: a nested block (the CLI's around an engine's ``train``) shares the outer block's request;
    the outermost block restores the previous handlers when it ends.
    """
    if _active:
        yield _active[0]
        return
    request = StopRequest()
    if threading.current_thread() is threading.main_thread():
        request._installed = {sig: signal.signal(sig, request) for sig in SIGNALS if _take_over(sig)}
    _active.append(request)
    try:
        with tolerate_lost_output():
            yield request
    finally:
        _active.clear()
        for sig, handler in request._installed.items():
            signal.signal(sig, handler)
        request._installed = {}


_LOST = (OSError, ValueError)  # EPIPE, EIO (a closed terminal), EBADF; ValueError: a closed file object


def _point_at_devnull(fd: int) -> None:
    """Make ``fd`` /dev/null: what is still buffered for it, C code and the flush at exit write nowhere,
    without an error."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


class _TolerantStream:
    """``sys.stdout`` / ``sys.stderr`` for a training command: once a write or flush fails, the stream's
    descriptor becomes /dev/null and everything after is dropped; nothing raises."""

    def __init__(self, stream: Any, fd: int) -> None:
        self._stream, self._fd, self.lost = stream, fd, False

    def _lose(self) -> None:
        self.lost = True
        with contextlib.suppress(*_LOST):
            if self._stream.fileno() == self._fd:
                _point_at_devnull(self._fd)

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self._stream.write(text)
            except _LOST:
                self._lose()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except _LOST:
                self._lose()

    def isatty(self) -> bool:
        try:
            return not self.lost and self._stream.isatty()
        except _LOST:
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def tolerate_lost_output() -> Iterator[None]:
    """For the block, output that cannot be written is dropped instead of raising, so a training run never
    fails or loses its work because nobody reads it: stdout or stderr closed at start (``>&-``: a
    descriptor that is not open is pointed at /dev/null, so no file opened later takes its number), a
    reader that went away (EPIPE), a terminal that closed (EIO). The run goes on and ends as it would have,
    with the same exit code; what it printed after the loss is gone (``log.txt`` and ``progress.csv`` have
    the numbers). Outside the main thread the streams are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            _point_at_devnull(fd)
    saved = sys.stdout, sys.stderr
    guarded = []
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is None:  # Python found the descriptor closed at start; it is /dev/null now
            stream = open(fd, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
        guarded.append(_TolerantStream(stream, fd))
        setattr(sys, name, guarded[-1])
    try:
        yield
    finally:
        for stream in guarded:
            stream.flush()  # what is still buffered: written now, or dropped if the reader is gone
        sys.stdout, sys.stderr = saved


def active_stop_request() -> StopRequest | None:
    """The request of the active :func:`stop_signals` block, or None outside one."""
    return _active[0] if _active else None
