"""A Ctrl-C while the ``retrokit`` command is still starting ends it the way a later one does: one line,
``retrokit: interrupted``, exit code 130, no traceback.

Imported first by the package (``retro_atari_kit/__init__.py``), so it covers the second or so the command
spends importing the kit, gymnasium, numpy and OpenCV before its own handling begins (``retrokit train``
then catches the signals itself: ``retro_atari_kit.runs.stop``). Nothing has been written at that point, so
there is nothing to clean up. Only the ``retrokit`` command is affected (its console script, or ``python -m
retro_atari_kit.cli``): a program that imports the kit keeps Python's own handling of KeyboardInterrupt.
Standard library only, and nothing else imported: it must cost nothing before it is in place.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import TracebackType

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]

EXIT_CODE = 130  # 128 + SIGINT, the shell's convention for a command ended by Ctrl-C


def _is_retrokit_command() -> bool:
    """True in the ``retrokit`` console script and in ``python -m retro_atari_kit.cli``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name in ("retrokit", "retrokit.exe"):
        return True
    argv = list(getattr(sys, "orig_argv", []))  # while -m imports the package, sys.argv[0] is "-m"
    return any(
        a == "-m" and b.startswith("retro_atari_kit.cli") for a, b in zip(argv, argv[1:], strict=False)
    )


def _hook(previous: ExceptHook) -> ExceptHook:
    def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            previous(kind, value, tb)
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is sys.stderr:
                    stream.write("retrokit: interrupted\n")
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass  # a closed or missing stream: the exit code still says it
        os._exit(EXIT_CODE)  # only imports were under way: nothing to finalize

    return excepthook


def install() -> None:
    """Make an uncaught KeyboardInterrupt one line and exit code 130, in the ``retrokit`` command only."""
    if _is_retrokit_command() and not getattr(sys.excepthook, "_retrokit", False):
        sys.excepthook = _hook(sys.excepthook)
        sys.excepthook._retrokit = True  # type: ignore[attr-defined]


install()
