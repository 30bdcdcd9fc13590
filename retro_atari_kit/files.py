"""Atomic writes: a reader never sees a half-written config, model, ROM or log.

The bottom layer of the core beside ``errors`` (it imports nothing of the kit but ``errors``), so that
every layer that writes files (ROMs, runs, evaluation records, videos, the CLI) shares one rule without
importing the run layer.

Every file (or directory) is written under a temporary name in the destination's own directory
(``.<stem>.tmp-<pid><ext>``), flushed to disk, then renamed over the destination with ``os.replace``, which
is atomic on POSIX and Windows within one file system; the directory is flushed too, so after a power loss
the destination is the old file or the new one, whole. A process killed while writing (SIGKILL, the OOM
killer) leaves only its temporary: :func:`leftover_temporaries` finds them.

When the operating system says no (a name too long, a read-only or full disk, a folder where a file is
expected, /proc), the OSError names the destination, never the temporary, and :func:`os_error_message` turns
it into the kit's one line: what failed, where, why, and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Callable

from retro_atari_kit.errors import RunError

_TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)")  # a temporary of _temporary_path, or its ".old" aside
_ASIDE = ".old"  # atomic_write's name for a directory being replaced: <temporary>.old


def _name_max(directory: str) -> int:
    """The longest name (in bytes) the file system of ``directory`` takes (255 on Linux's usual ones)."""
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _path_max(directory: str) -> int:
    """The longest path (in bytes, its terminating NUL included) the OS takes under ``directory``."""
    try:
        return int(os.pathconf(directory, "PC_PATH_MAX"))
    except (OSError, ValueError):
        return 4096


def _temporary_path(path: str) -> str:
    directory, name = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(name)
    tail = f".tmp-{os.getpid()}{ext}"
    # a long destination name still gets a temporary (and its ".old" aside) the file system takes
    room = _name_max(directory) - len(os.fsencode(tail)) - len(_ASIDE) - 1
    stem = os.fsdecode(os.fsencode(stem)[: max(room, 1)]) if len(os.fsencode(stem)) > room else stem
    # keep the extension last: some writers (SB3's model.save) append ".zip" to names without it
    return os.path.join(directory, f".{stem}{tail}")


def _too_long(path: str, names: list[str], directory: str, headroom: int = 0) -> None:
    """OSError(ENAMETOOLONG) naming ``path`` if one of ``names`` is longer than ``directory``'s file system
    takes, or the whole path (with ``headroom`` bytes more for what will be made inside it) is longer than the
    OS takes: found before anything is written, not after a whole checkpoint was, nor after half the folders
    of a path were made."""
    limit = _name_max(directory)
    full = len(os.fsencode(os.path.abspath(path))) + headroom
    if any(len(os.fsencode(name)) > limit for name in names) or full >= _path_max(directory):
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), path)


def check_creatable(path: str, headroom: int = 0) -> None:
    """OSError naming ``path`` unless a file or folder can be made there, with any missing folders above it:
    every missing name fits the file system, the whole path (plus ``headroom`` bytes for the names a folder
    will hold) fits the OS's longest path, and the nearest existing folder takes a new entry (a probe file,
    made and removed at once). Finds a name or path too long, a read-only file system, a folder without
    write permission (for root too), /proc and other virtual file systems, a file where a folder is expected.
    Leaves nothing behind; a full disk usually still takes the probe (the write itself reports it)."""
    full = os.path.abspath(path)
    directory, missing = os.path.dirname(full), [os.path.basename(full)]
    if os.path.lexists(full):  # replaced: its folder must take the temporary
        missing = []
    while not os.path.exists(directory) and os.path.dirname(directory) != directory:
        missing.append(os.path.basename(directory))
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    _too_long(path, missing, directory, headroom)
    probe = os.path.join(directory, f".retrokit-probe.tmp-{os.getpid()}")  # a leftover is a temporary
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.remove(probe)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's process (or a pid that no kill can name): left alone
    return True


def _dead_temporaries(path: str) -> list[str]:
    """The temporaries of earlier atomic writes of ``path`` (and their ``.old`` asides) whose process is gone:
    writes cut short by SIGKILL or a power loss, which nothing else would remove."""
    tmp = _temporary_path(path)
    directory, name = os.path.split(tmp)
    head, tail = name.split(f".tmp-{os.getpid()}", 1)
    pattern = re.compile(rf"^{re.escape(head)}\.tmp-(\d+){re.escape(tail)}(?:{re.escape(_ASIDE)})?$")
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [
        os.path.join(directory, entry)
        for entry in sorted(names)
        if (match := pattern.match(entry))
        and int(match.group(1)) != os.getpid()
        and not _pid_alive(int(match.group(1)))
    ]


def remove_dead_temporaries(path: str) -> list[str]:
    """Remove :func:`_dead_temporaries` of ``path``; returns what was removed. An ``.old`` aside is a whole
    earlier version moved away for the write: where ``path`` itself is missing it is put back, not removed."""
    removed = []
    for leftover in _dead_temporaries(path):
        try:
            if leftover.endswith(_ASIDE) and not os.path.lexists(path):
                os.replace(leftover, path)
                continue
            shutil.rmtree(leftover) if os.path.isdir(leftover) and not os.path.islink(
                leftover
            ) else os.remove(leftover)
            removed.append(leftover)
        except OSError:
            continue  # not ours to force: the run layer names what it cannot remove
    return removed


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
    changes and the temporary is removed. An OSError (a full disk, a read-only one, ...) names ``path``, also
    when the writer reported it as another exception (torch's zip writer on a full disk raises RuntimeError).
    """
    _too_long(path, [os.path.basename(os.path.abspath(path))], os.path.dirname(os.path.abspath(path)))
    remove_dead_temporaries(path)  # a killed writer's temporary of this file does not outlive this write
    tmp = _temporary_path(path)
    try:
        write(tmp)
        if os.path.isfile(tmp):  # on disk before it takes the name: a crash never leaves a named stub
            _sync(tmp)
        if os.path.isdir(tmp) and os.path.isdir(path):
            old = f"{tmp}{_ASIDE}"
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _sync(os.path.dirname(tmp))
    except BaseException as exc:
        full = isinstance(exc, RuntimeError) and _no_space(
            os.path.dirname(tmp)
        )  # while the temporary is there
        old = f"{tmp}{_ASIDE}"
        if os.path.isdir(old) and not os.path.lexists(path):  # the replaced directory goes back
            with contextlib.suppress(OSError):
                os.replace(old, path)
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            with contextlib.suppress(OSError):  # the error being raised is the one to report
                os.remove(tmp)
        if isinstance(exc, OSError) and exc.errno is not None:
            if exc.filename is None or str(exc.filename).startswith(tmp):
                exc.filename, exc.filename2 = path, None  # the destination, not our temporary
        elif isinstance(exc, RuntimeError):  # torch's writers: C++ stream errors without an errno
            cause = exc.__context__ if isinstance(exc.__context__, OSError) else None
            code = cause.errno if cause is not None and cause.errno else errno.ENOSPC if full else None
            if code is not None:
                raise OSError(code, os.strerror(code), path) from exc
        raise


def _no_space(directory: str) -> bool:
    """Whether the file system of ``directory`` is full (less than 1 MiB left to this user)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail  # root may use the reserved blocks
    return blocks * st.f_frsize < 1 << 20


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


def check_entries(directory: str, files: tuple[str, ...], folders: tuple[str, ...], what: str) -> None:
    """RunError if an entry of ``directory`` that will be written is not what the writer expects: one of
    ``files`` is a folder, one of ``folders`` is a file, or either is a link to nothing. Missing ones are
    fine. Run it before anything is written, so the refusal leaves the directory as it was."""
    for name in (*files, *folders):
        path = os.path.join(directory, name)
        if os.path.islink(path) and not os.path.exists(path):
            why = f"a link to {os.readlink(path)}, which does not exist; restore it or remove the link"
        elif name in files and os.path.isdir(path):
            why = "a folder where a file is expected; move it away and retry"
        elif name in folders and os.path.lexists(path) and not os.path.isdir(path):
            why = "a file where a folder is expected; move it away and retry"
        else:
            continue
        raise RunError(f"{what} {directory}: {path} is {why}")


# what to do, by errno, when the operating system refuses a path (os_error_message)
_ADVICE = {
    errno.ENAMETOOLONG: "a name in it is longer than its file system takes ({limit} bytes); shorten it",
    errno.ENOSPC: "the disk is full; free some space or use another disk",
    errno.EDQUOT: "the disk quota is used up; free some space or use another disk",
    errno.EFBIG: "the file is larger than the file system takes; use another disk",
    errno.EROFS: "the file system is read-only; use a path on a writable disk",
    errno.EACCES: "check its permissions (and its folders'), or use another path",
    errno.EPERM: "check its permissions (and its folders'), or use another path",
    errno.EISDIR: "a folder is where a file is expected; move the folder away or use another path",
    errno.ENOTDIR: "a file is where a folder is expected; move the file away or use another path",
    errno.EEXIST: "something is already there; move it away or use another path",
    errno.ELOOP: "a link in it leads back to itself; fix the link",
    errno.EIO: "the disk (or network file system) failed; check it, then retry",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n) and retry",
    errno.ENFILE: "too many open files; raise the limit (ulimit -n) and retry",
}
_PATH_ADVICE = (
    "the path is longer than the OS takes ({limit} bytes, with the names made inside it); shorten it"
)
_VIRTUAL = ("/proc", "/sys")  # the kernel's views: no files can be made there


def _shown(path: str) -> str:
    """``path`` for a message: a name longer than 60 characters is cut to its start and its length."""
    parts = [p if len(p) <= 60 else f"{p[:24]}...({len(p)} characters)" for p in path.split(os.sep)]
    return os.sep.join(parts)


def os_error_advice(exc: OSError) -> str:
    """What to do about ``exc``: a broken link, a virtual file system, a full disk, ... (one clause)."""
    path = os.fsdecode(exc.filename) if isinstance(exc.filename, (str, bytes)) else None
    if exc.errno == errno.ENOENT and path is not None:
        link = next((p for p in _ancestors(path) if os.path.islink(p) and not os.path.exists(p)), None)
        if link is not None:
            target = os.readlink(link)
            return f"{link} is a link to {target}, which does not exist; restore it or remove the link"
        virtual = next((v for v in _VIRTUAL if _under(os.path.realpath(path), v)), None)
        if virtual is not None:
            return f"{virtual} is the kernel's view of the system, not a disk; use a path on a disk"
        return "no such file or folder; check the path"
    advice = _ADVICE.get(exc.errno, "check the path, or use another one")
    if "{limit}" in advice:
        folder = os.path.dirname(os.path.abspath(path or "."))
        limit = _name_max(nearest_folder(folder) if not os.path.isdir(folder) else folder)
        if path is not None and all(len(os.fsencode(p)) <= limit for p in path.split(os.sep)):
            return _PATH_ADVICE.format(
                limit=_path_max(nearest_folder(path))
            )  # no name is too long: the path is
        advice = advice.format(limit=limit)
    return advice


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)


def _ancestors(path: str) -> list[str]:
    """``path`` and the folders above it, nearest first (as given, not resolved)."""
    out = [path]
    while os.path.dirname(out[-1]) not in ("", out[-1]):
        out.append(os.path.dirname(out[-1]))
    return out


def os_error_message(exc: OSError, what: str = "", advice: str | None = None, flag: str | None = None) -> str:
    """One line for an OSError the user can act on: ``<what> <path>: <strerror>; <what to do>`` (the advice
    of :func:`os_error_advice` unless ``advice`` is given; with ``flag``, a folder that refuses new files
    is named and another ``flag`` asked for); the path is left out when the error has none."""
    why = exc.strerror or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    path = os.fsdecode(exc.filename) if isinstance(exc.filename, (str, bytes)) else None
    if advice is None and flag is not None and path is not None:
        blocker = next((p for p in _ancestors(os.path.abspath(path)) if os.path.lexists(p)), "")
        if exc.errno in _NOT_WRITABLE:
            advice = f"{nearest_folder(path)} is not writable; pass another {flag}"
        elif exc.errno == errno.ENOTDIR and not os.path.isdir(blocker):
            advice = f"{blocker} is a file, not a folder; pass another {flag}"
        elif exc.errno == errno.ENAMETOOLONG:
            advice = os_error_advice(exc).replace("shorten it", f"pass a shorter {flag}")
    head = " ".join(part for part in (what, _shown(path) if path is not None else "") if part)
    line = f"{why}; {advice or os_error_advice(exc)}"
    return f"{head}: {line}" if head else line


_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def read_error_message(exc: OSError, what: str = "cannot read") -> str:
    """One line for an OSError met while reading a file the kit needs: :func:`os_error_message`, but a
    permission error asks to fix the permissions only (the file itself may be fine: no other path will do)."""
    advice = "check its permissions (and its folders')" if exc.errno in (errno.EACCES, errno.EPERM) else None
    return os_error_message(exc, what, advice=advice)


def nearest_folder(path: str) -> str:
    """The nearest folder above ``path`` (absolute) that exists: where a new ``path`` would be made."""
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder
