"""Child-side code for tests/core/test_processes.py: imported by real child processes (``forkserver`` /
``spawn`` children import it by name, so it cannot live in the test module)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from retro_atari_kit.processes import reply


class CustomError(Exception):
    """An exception class of the user's own: it must arrive in the parent as itself."""


class TwoArgumentError(Exception):
    """Cannot be rebuilt from its ``args`` (pickle calls ``cls(*args)``), so it cannot cross a pipe."""

    def __init__(self, first: str, second: str):
        super().__init__(first)
        self.second = second


class Echo:
    """A request/answer handler; ``log`` (a path) records that ``close()`` ran."""

    def __init__(self, log: str | None = None):
        self.log = log

    def hello(self) -> tuple[str, int]:
        return ("hello", os.getpid())

    def handle(self, command: str, data: Any) -> Any:
        if command == "echo":
            return data
        if command == "sleep":
            time.sleep(data)
            return "slept"
        if command == "raise":
            kind, message = data
            raise {"ValueError": ValueError, "KeyError": KeyError, "CustomError": CustomError}[kind](message)
        if command == "raise-unpicklable":
            raise TwoArgumentError(data, "second")
        if command == "unpicklable-result":
            return lambda: None
        raise ValueError(f"unknown command {command!r}")

    def close(self) -> None:
        if self.log is not None:
            with open(self.log, "w") as f:
                f.write("closed")


class BadKwarg:
    """A handler whose construction fails, as an env with a bad kwarg does."""

    def __init__(self) -> None:
        raise ValueError("frame_skip must be >= 1, got 0")


def crash_after_hello(conn) -> None:
    reply(conn, "hello")
    conn.recv()
    raise RuntimeError("the emulator lost its ROM\nsecond line")


def crash_at_once(conn) -> None:
    raise RuntimeError("cannot build the env")


def silent(conn) -> None:
    time.sleep(120)


def stubborn(conn) -> None:
    """Answers once, then ignores ``close``, SIGTERM and the pipe: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    reply(conn, "hello")
    while True:
        time.sleep(1)
