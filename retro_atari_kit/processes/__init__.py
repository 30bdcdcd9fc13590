"""Child processes of the kit (the vector env's workers, the retro env worker, the SB3 play process):
one host for all of them.

- :mod:`.start`: the start method, the stop signals only the parent acts on (a child is started with them
  blocked and ignores them), what to tell the user when a child dies while starting, exceptions that
  cross a pipe, a bounded stop of any process.
- :mod:`.host`: :class:`ChildProcess` (start a child with a pipe; send, receive and request with a wait
  that notices a dead child at once; the one died error; stop), :func:`serve` (the child side of a
  request/answer child), :func:`receive_all` (one answer from each of several children) and
  :func:`stop_all`.
- :mod:`.wakeups`: :class:`Wakeups`, one wake-up for many children whose work lives in shared memory (a
  semaphore per child, a countdown, one semaphore back), the pipe kept for everything else.
"""

from retro_atari_kit.processes.host import (
    ChildDiedError,
    ChildProcess,
    receive_all,
    reply,
    reply_error,
    serve,
    stop_all,
)
from retro_atari_kit.processes.start import default_start_method, stop_signals_blocked, worker_start_hint
from retro_atari_kit.processes.wakeups import ChildWakeup, Wakeups

__all__ = [
    "ChildDiedError",
    "ChildProcess",
    "ChildWakeup",
    "Wakeups",
    "default_start_method",
    "receive_all",
    "reply",
    "reply_error",
    "serve",
    "stop_all",
    "stop_signals_blocked",
    "worker_start_hint",
]
