"""Stop requests: what Ctrl-C (SIGINT) and SIGTERM do to a training command, for every engine.

While a ``stop_signals()`` block is active, both signals only set a flag (:class:`StopRequest`); nothing is
cut short in the middle of a write. The code that owns the run decides what the request means where it
reads it:

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
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
    """Set by SIGINT / SIGTERM while a :func:`stop_signals` block is active."""

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
        if self._installed:
            for sig in SIGNALS:
                signal.signal(sig, self)


_active: list[StopRequest] = []  # the request of the outermost active block, if any


@contextlib.contextmanager
def stop_signals() -> Iterator[StopRequest]:
    """Catch SIGINT / SIGTERM for the block and yield the :class:`StopRequest` they set.

    Re-entrant: a nested block (the CLI's around an engine's ``train``) shares the outer block's request;
    the outermost block restores the previous handlers when it ends.
    """
    if _active:
        yield _active[0]
        return
    request = StopRequest()
    if threading.current_thread() is threading.main_thread():
        request._installed = {sig: signal.signal(sig, request) for sig in SIGNALS}
    _active.append(request)
    try:
        yield request
    finally:
        _active.clear()
        for sig, handler in request._installed.items():
            signal.signal(sig, handler)
        request._installed = {}


def active_stop_request() -> StopRequest | None:
    """The request of the active :func:`stop_signals` block, or None outside one."""
    return _active[0] if _active else None
