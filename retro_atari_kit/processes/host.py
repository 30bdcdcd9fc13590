"""One host for every child process of the kit: start it, talk to it, notice at once when it dies, stop it.

Parent side, :class:`ChildProcess`: starts ``target(conn, *args)`` in a child with a pipe, sends commands,
and waits for answers on the pipe *and* the child's process sentinel, so a child that dies (crash, OOM
killer, ``kill -9``) raises one :class:`ChildDiedError` line naming it, its pid and why, as soon as it is
gone; a child that stays silent past a timeout is stopped and named the same way. Nothing waits unbounded
on a dead child, and :meth:`ChildProcess.stop` is bounded too.

Child side: every child ignores the stop signals from its first instruction on (it is started with them
blocked; :data:`~retro_atari_kit.processes.start.STOP_SIGNALS` says why) and still ends with its parent
(EOF on the pipe). An exception that escapes ``target`` is sent to the parent as the reason it died.
:func:`serve` is the loop of a request/answer child.

Messages from child to parent: ``("ok", value)``; ``("error", exception, traceback)``: the command raised,
the child goes on; ``("fatal", one line, traceback)``: the child is exiting because of that exception.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import multiprocessing.util  # noqa: F401  (registers its exit function before ours: see _stop_live_children)
import signal
import traceback
import weakref
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from multiprocessing.reduction import ForkingPickler
from typing import Any, Protocol

from retro_atari_kit.processes.start import (
    default_start_method,
    end_process,
    ignore_stop_signals,
    picklable_exception,
    stop_signals_blocked,
    worker_start_hint,
)

OK, ERROR, FATAL = "ok", "error", "fatal"
CLOSE = "close"


class ChildDiedError(RuntimeError):
    """A child process died, or did not answer in time and was stopped. ``str()`` is one line naming the
    child, its pid and why; ``pid`` and ``exitcode`` are the child's (``exitcode`` negative: a signal);
    ``while_starting`` is True when it had not answered once yet (e.g. a script with no main guard)."""

    pid: int | None = None
    exitcode: int | None = None
    while_starting: bool = False


def exit_reason(exitcode: int | None) -> str:
    """``"killed by SIGKILL (signal 9)"``, ``"exited with code 1"``: how a child ended, in words."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name} (signal {-exitcode})"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _note(exc: BaseException, text: str) -> None:
    if hasattr(exc, "add_note"):  # Python 3.11+; the message itself stays the child's own
        exc.add_note(text)


def one_line(exc: BaseException) -> str:
    """``"TypeError: first line of the message"``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# -- child side ---------------------------------------------------------------------------------------------
def _child_main(conn: Connection, parent_end: Connection | None, target: Callable, args: tuple) -> None:
    """What every child runs: ``target(conn, *args)``, stop signals ignored, a fatal exception reported."""
    ignore_stop_signals()  # the parent handles them: it saves, then stops its children
    if parent_end is not None:
        parent_end.close()  # fork: without this the child would never see EOF when the parent goes
    try:
        target(conn, *args)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone or closing: nothing to report to
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as the reason this child died
        try:
            conn.send((FATAL, one_line(exc), traceback.format_exc()))
        except (OSError, ValueError):
            pass
        raise SystemExit(1) from None
    finally:
        conn.close()


def reply(conn: Connection, value: Any) -> None:
    """Child side: answer the parent's pending :meth:`ChildProcess.receive` with ``value``."""
    conn.send((OK, value))


def reply_error(conn: Connection, exc: BaseException) -> None:
    """Child side: answer the pending :meth:`ChildProcess.receive` with ``exc`` (raised there, same type)."""
    conn.send((ERROR, picklable_exception(exc), traceback.format_exc()))


class Handler(Protocol):
    """What :func:`serve` runs: ``hello()`` is the start-up answer, ``handle`` answers one command. A handler
    may also have ``next_command(conn)``, returning the next ``(command, data)``: one that waits on a
    semaphore (:mod:`.wakeups`) rather than its pipe, doing its shared-memory work in between."""

    def hello(self) -> Any: ...

    def handle(self, command: str, data: Any) -> Any: ...

    def close(self) -> None: ...


def serve(conn: Connection, make_handler: Callable[..., Handler], *args: Any) -> None:
    """Child side of a request/answer child (use as the target of :class:`ChildProcess`).

    ``make_handler(*args)`` builds the handler; its ``hello()`` (or the exception building it raised) is the
    answer to the parent's start-up :meth:`ChildProcess.receive`. Then each ``(command, data)`` is answered
    with ``handler.handle(command, data)`` or the exception it raised (the child goes on), until ``close``
    or until the parent's end of the pipe closes; the handler is closed either way.
    """
    try:
        handler = make_handler(*args)
        hello = handler.hello()
    except Exception as exc:  # bad kwargs, missing ROM: raised by the parent's start-up receive
        reply_error(conn, exc)
        return
    try:
        reply(conn, hello)
        # a handler that waits on something besides its pipe (a semaphore) reads its next command itself
        next_command = getattr(handler, "next_command", None)
        while True:
            command, data = conn.recv() if next_command is None else next_command(conn)
            if command == CLOSE:
                return
            try:
                conn.send((OK, handler.handle(command, data)))  # an unpicklable result raises here too
            except Exception as exc:
                reply_error(conn, exc)
    finally:
        try:
            handler.close()
        except Exception:  # noqa: BLE001 - the child is ending; a failing close must not hide why
            pass


# -- parent side --------------------------------------------------------------------------------------------
class ChildProcess:
    """A started child process running ``target(conn, *args)`` with one pipe to it (see the module docstring).

    :param who: how errors name the child, e.g. ``"env rank 3 (RetroKit/Pong-v0): its worker process"``
        (``" (pid N) died: ..."`` follows)
    :param context: a start method name or a multiprocessing context (default: :func:`default_start_method`)
    :param advice: appended to the died error of a started child after ``"; "`` (what to do now)
    :param died: builds the error raised when the child died (a :class:`ChildDiedError` subclass)
    :param grace: seconds :meth:`stop` waits at each step (exit, then terminate, then kill)
    :param daemon: a daemon child ends with the parent's interpreter but cannot start children itself
    """

    def __init__(
        self,
        target: Callable[..., None],
        args: Iterable[Any] = (),
        *,
        who: str,
        name: str | None = None,
        context: str | BaseContext | None = None,
        advice: str = "",
        died: Callable[[str], ChildDiedError] = ChildDiedError,
        grace: float = 1.0,
        daemon: bool = True,
    ) -> None:
        ctx = (
            mp.get_context(context or default_start_method())
            if not isinstance(context, BaseContext)
            else context
        )
        self.start_method: str = ctx.get_start_method()
        self.who, self.advice, self.grace = who, advice, grace
        self._died_error = died
        self.started = False  # True once the child has answered once: a death after that is no start problem
        self.stopped = False
        self.broken: ChildDiedError | None = None
        self.conn, child_end = ctx.Pipe()
        inherited = self.conn if self.start_method == "fork" else None
        self.process = ctx.Process(
            target=_child_main, args=(child_end, inherited, target, tuple(args)), name=name, daemon=daemon
        )
        try:
            with stop_signals_blocked(self.start_method):  # so it cannot die of one before it ignores them
                self.process.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            child_end.close()
        self._waitables = [self.conn, self.process.sentinel]  # readable: an answer, or the child has ended
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    # -- talking ---------------------------------------------------------------------------------------
    def send(self, command: str, data: Any = None, wake: Callable[[], None] | None = None) -> None:
        """Send one command; raise the died error if the child is gone. ``wake`` is called once the command
        is pickled and before it is written (a child that waits on a semaphore: :mod:`.wakeups`), so a command
        that does not pickle raises here and wakes nobody."""
        if self.broken is not None or self.stopped:  # inline: this is every env step's path
            self._check()
        try:
            if wake is None:
                self.conn.send((command, data))
            else:
                message = ForkingPickler.dumps((command, data))
                wake()
                self.conn.send_bytes(message)
        except (OSError, EOFError):
            raise self._fail(self._died()) from None

    def receive(self, timeout: float | None = None) -> Any:
        """The child's next answer. Its exception is raised here (same type and message, its traceback as a
        note); a dead child raises the died error at once; no answer within ``timeout`` seconds (None: wait
        as long as the child lives) stops the child and raises the died error. Ctrl-C while waiting stops
        the child too: an answer may still be on its way, so the pipe can no longer be trusted."""
        if self.broken is not None or self.stopped:
            self._check()
        conn = self.conn
        try:
            ready = wait(self._waitables, timeout)
            if not ready:
                raise self._fail(self._silent(timeout))
            if conn not in ready and not conn.poll():
                raise self._fail(self._died())
            message = conn.recv()
        except (EOFError, OSError):
            raise self._fail(self._died()) from None
        except KeyboardInterrupt:
            self.stop()
            raise
        status = message[0]
        if status == OK:
            self.started = True
            return message[1]
        if status == ERROR:
            self.started = True
            _, exc, child_traceback = message
            _note(exc, f"raised in {self.who} (pid {self.pid}):\n{child_traceback}")
            raise exc
        if status == FATAL:
            raise self._fail(self._died(message))
        raise RuntimeError(f"{self.who} (pid {self.pid}) sent an unknown message {status!r}")

    def request(self, command: str, data: Any = None, timeout: float | None = None) -> Any:
        """:meth:`send` then :meth:`receive`."""
        self.send(command, data)
        return self.receive(timeout)

    def raise_if_dead(self) -> None:
        """Raise the died error if the child has ended (for a parent that waits on something else)."""
        self._check()
        if not self.process.is_alive():
            raise self._fail(self._died())

    # -- errors ----------------------------------------------------------------------------------------
    def _check(self) -> None:
        if self.broken is not None:
            raise self.broken  # a dead child stays dead: every later call raises the same error at once
        if self.stopped:
            raise RuntimeError(f"{self.who} (pid {self.pid}) was stopped")

    def _fail(self, error: ChildDiedError) -> ChildDiedError:
        self.broken = error
        return error

    def _make(self, message: str) -> ChildDiedError:
        if self.advice and self.started:  # the owner was made: say what to do with it now
            message = f"{message}; {self.advice}"
        error = self._died_error(message)
        error.pid, error.exitcode = self.pid, self.process.exitcode
        error.while_starting = not self.started
        return error

    def _died(self, fatal: tuple | None = None) -> ChildDiedError:
        """The error for a child that has ended; its own last words (a fatal message) if it sent any."""
        try:
            while fatal is None and self.conn.poll():
                message = self.conn.recv()
                if message[0] == FATAL:
                    fatal = message
        except (EOFError, OSError):
            pass
        # reap it, and let its exit code arrive; a child that sent its last words is exiting, but tearing down
        # an interpreter with torch loaded can take seconds on a busy machine
        self.process.join(5.0 if fatal is not None else 1.0)
        code = self.process.exitcode
        reason = fatal[1] if fatal is not None else exit_reason(code)
        if self.started:
            error = self._make(f"{self.who} (pid {self.pid}) died: {reason}")
        else:
            message = f"{self.who} (pid {self.pid}) died while starting: {reason}"
            # no last words and no signal: it died before running our code (re-importing the main script)
            if fatal is None and (code is None or code >= 0) and self.start_method != "fork":
                message += f". {worker_start_hint(self.start_method)}"
            error = self._make(message)
        if fatal is not None:
            _note(error, f"{self.who} (pid {self.pid}):\n{fatal[2]}")
        return error

    def _silent(self, timeout: float | None) -> ChildDiedError:
        self.stop()
        what = "did not answer" if self.started else "did not start"
        return self._make(f"{self.who} (pid {self.pid}) {what} within {timeout:g} s and was stopped")

    # -- stopping --------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the child to exit, then terminate, then kill it; every wait bounded. Idempotent."""
        stop_all([self])


def receive_all(children: Sequence[ChildProcess], timeout: float | None = None) -> list[Any]:
    """One answer from each child, in order. A child's exception is raised only once every other answer has
    been read, so each pipe stays in step and every child stays usable; a died error is raised at once."""
    results: list[Any] = []
    first: Exception | None = None
    for child in children:
        try:
            results.append(child.receive(timeout))
        except ChildDiedError:
            raise
        except Exception as exc:
            results.append(None)
            first = first or exc
    if first is not None:
        raise first
    return results


def stop_all(children: Iterable[ChildProcess]) -> None:
    """Stop several children at once: all are asked to exit first, so they close their envs in parallel."""
    children = [c for c in children if not c.stopped]
    for child in children:
        child.stopped = True
        if child.process.is_alive():
            try:
                child.conn.send((CLOSE, None))
            except (OSError, ValueError):
                pass
    for child in children:
        end_process(child.process, child.grace)
        child.conn.close()


# Children not stopped by their owner (a vector env never closed) are stopped at interpreter exit, before
# multiprocessing's own exit function runs (atexit runs the newest first): that one terminates daemon
# children with SIGTERM and then joins them, and the kit's children ignore SIGTERM (a stop sent to the
# whole process group is the parent's to handle), so without this the interpreter would wait forever.
_LIVE: weakref.WeakSet[ChildProcess] = weakref.WeakSet()


def _stop_live_children() -> None:
    stop_all(list(_LIVE))


atexit.register(_stop_live_children)
