"""The kit's bottom layer for user errors: the one error type and the checks that raise it.

Any layer may import this module (presets, models, registration, evaluation, recording, the run layer, the
CLI); it imports nothing of the kit.
"""

from __future__ import annotations

import operator
import os
from typing import Any


def as_int(value: Any) -> int | None:
    """``value`` as a Python int when it is an integer of any kind (``int``, ``np.int64``, anything
    ``operator.index`` takes), else None. Bools are not integers here: ``num_envs=True`` is a mistake."""
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):  # numpy's bool too
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


class RunError(ValueError):
    """A user error: its message is one line that says what to do. The CLI prints it and exits 2."""


def check_output_path(path: str, flag: str = "--out") -> None:
    """ValueError (one line) unless a file can be written at ``path``: not a folder, in an existing,
    writable folder. Run it before the work whose result goes there."""
    if os.path.isdir(path):
        raise ValueError(
            f"{flag} {path}: is a folder; pass a file name in it, e.g. {os.path.join(path, 'x')}"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: {folder} is a file, not a folder; pass another path")
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist; create it or pass another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: the folder {folder} is not writable; pass another path")
