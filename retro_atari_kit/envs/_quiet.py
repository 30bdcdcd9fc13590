"""ale-py's start-up banner kept off stderr, for the Python API and the ``retrokit`` command alike."""

from __future__ import annotations

_quieted = False


def quiet_ale_banner() -> None:
    """Keep ale-py's start-up banner (``A.L.E: Arcade Learning Environment ...``, ``[Powered by Stella]``)
    off stderr; warnings and errors still show.

    ale-py prints the banner through its C++ logger at Info level when the first ``ALEInterface`` is built.
    The level is process-wide (a static method), so setting Warning before that keeps the banner out and
    every warning or error in (``AtariEnv`` then sets Error itself, as it always does; ale-py's
    ``AtariVectorEnv`` sets it before its emulators start and prints no banner). Set once per process, so
    a level the user chooses later stays.
    """
    global _quieted
    if _quieted:
        return
    try:
        import ale_py
    except ImportError:
        return
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
    _quieted = True
