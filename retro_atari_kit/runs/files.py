"""Atomic writes: a reader never sees a half-written config, model or log.

Every file (or directory) is written under a temporary name in the destination's own directory
(``.<stem>.tmp-<pid><ext>``), flushed to disk, then renamed over the destination with ``os.replace``, which
is atomic on POSIX and Windows within one file system; the directory is flushed too, so after a power loss
the destination is the old file or the new one, whole. A process killed while writing (SIGKILL, the OOM
killer) leaves only its temporary: :func:`leftover_temporaries` finds them.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable

_TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)")  # a temporary of _temporary_path, or its ".old" aside


def _temporary_path(path: str) -> str:
    directory, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    # keep the extension last: some writers (SB3's model.save) append ".zip" to names without it
    return os.path.join(directory, f".{stem}.tmp-{os.getpid()}{ext}")


def leftover_temporaries(directory: str) -> list[str]:
    """Paths of the temporaries of atomic writes in ``directory`` that another process started: writes cut
    short if that process is gone. Only the caller knows whether it is (e.g. it holds the run's lock)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    mine = str(os.getpid())
    return [
        os.path.join(directory, name)
        for name in names
        if (match := _TEMPORARY.match(name)) is not None and match.group(1) != mine
    ]


def _sync(path: str) -> None:
    """Flush a file, or a directory's entries, to disk (best effort: not every file system can)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` to create a file or directory at ``tmp``, then move it over ``path``.

    A directory that already exists at ``path`` is replaced as a whole (renamed aside, then removed), so
    directory checkpoints (e.g. RLlib's) are as atomic as file ones. On an exception nothing at ``path``
    changes and the temporary is removed.
    """
    tmp = _temporary_path(path)
    try:
        write(tmp)
        if os.path.isfile(tmp):  # on disk before it takes the name: a crash never leaves a named stub
            _sync(tmp)
        if os.path.isdir(tmp) and os.path.isdir(path):
            old = f"{tmp}.old"
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _sync(os.path.dirname(tmp))
    except BaseException:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write_bytes(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically (flushed to disk before the rename), permissions ``mode``."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)

    atomic_write(path, write)


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (flushed to disk before the rename)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    atomic_write(path, write)
