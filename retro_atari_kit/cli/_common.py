"""Shared helpers of the ``retrokit`` commands."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def quiet_ale_banner() -> None:
    """Keep ale-py's start-up banner (``A.L.E: Arcade Learning Environment ...``, ``[Powered by Stella]``) off
    stderr, where it would precede the one error line of a command that probes an env.

    ale-py prints it through its C++ logger at Info level when the first ``ALEInterface`` is built, and only
    then sets the level to Error; the level is process-wide (a static method), so setting it first keeps the
    banner out and every warning or error in.
    """
    try:
        import ale_py
    except ImportError:
        return
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)


class CliError(Exception):
    """A user error: printed as one line ``retrokit: error: ...`` and exit code 2."""


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the user-facing errors of the core and the engines (RunError and other ValueErrors, a missing
    optional package) into CliError: one line, exit 2."""
    try:
        yield
    except CliError:
        raise
    except ImportError as exc:
        raise CliError(
            f"{exc}; install the missing package (e.g. pip install 'retro-atari-kit[contrib]')"
        ) from exc
    except ValueError as exc:  # RunError is a ValueError
        raise CliError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc
