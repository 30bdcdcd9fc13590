"""Shared helpers of the ``retrokit`` commands."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType

from retro_atari_kit.runs.engine import load_engine


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


def engine(name: str) -> ModuleType:
    """The engine module ``name`` from the run layer's one engine table (``runs.engine.ENGINE_REGISTRY``);
    CliError naming the choices or the package to install."""
    with user_errors():
        return load_engine(name)


def add_play_options(p) -> None:
    """The options of every command that plays a model (``eval``, ``record``): how it acts, which env."""
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="greedy (arg-max) actions (default: off, actions sampled from the policy)",
    )
    p.add_argument(
        "--env",
        default=None,
        help="env ID, needed for a model file outside a run dir (default: the run's env_id)",
    )
    p.add_argument(
        "--allow-pickle",
        action="store_true",
        help="load a model file from outside a kit run dir with SB3's own loader, which unpickles its "
        "values and so can run code: only for files whose maker you trust (default: refused)",
    )
