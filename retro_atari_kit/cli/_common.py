"""Shared helpers of the ``retrokit`` commands."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class CliError(Exception):
    """A user error: printed as one line ``retrokit: error: ...`` and exit code 2."""


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the integrations' user-facing errors (TrainingError, ValueError from env kwargs) into CliError."""
    try:
        yield
    except CliError:
        raise
    except ImportError as exc:
        raise CliError(f"{exc}; install the missing package (e.g. pip install 'retro-atari-kit[contrib]')") \
            from exc
    except ValueError as exc:  # TrainingError is a ValueError
        raise CliError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc


def positive_int(text: str) -> int:
    import argparse

    try:
        v = int(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return v


def nonneg_steps(text: str) -> int:
    import argparse

    try:
        v = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 1e5)") from None
    if v < 0 or v != int(v):
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 0")
    return int(v)
