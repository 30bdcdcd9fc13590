"""Checkpoints of a run: ``checkpoints/model_<steps>_steps<suffix>``, and the final model.

The step count is in the name, so listing needs no engine. A checkpoint can be a file (SB3's ``.zip``) or a
directory (RLlib's). The final model is the last checkpoint published under a stable name as an independent
copy, written atomically: no hard link or symlink, so one damaged write (or a damaged checkpoint) never
takes both, and deleting ``checkpoints/`` keeps the final model.

A trainer killed while saving (SIGKILL, the OOM killer, a power loss) leaves a temporary of the atomic write,
or after a power loss possibly a named zip that was never completed: :func:`unfinished_writes` finds both, a
resume starts from the newest complete checkpoint and removes them once all its checks have passed. A file
the kit did not write (not a zip at all) is never removed: the engine names it.
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile

from retro_atari_kit.errors import RunError
from retro_atari_kit.files import atomic_write, leftover_temporaries, read_error_message
from retro_atari_kit.runs.lock import lock_owner
from retro_atari_kit.runs.untrusted import zip_is_sane

CHECKPOINT_DIR = "checkpoints"
_NAME = re.compile(r"^model_(\d+)_steps(\.zip)?$")


def checkpoint_path(run_dir: str, steps: int, suffix: str = ".zip") -> str:
    """``<run_dir>/checkpoints/model_<steps>_steps<suffix>``."""
    return os.path.join(run_dir, CHECKPOINT_DIR, f"model_{int(steps)}_steps{suffix}")


def list_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """``[(steps, path), ...]`` of the run's checkpoints, oldest first; RunError (one line, "permission
    denied" and the folder) if ``checkpoints/`` exists but cannot be listed: saying "no checkpoint" there
    would invite ``--force`` over a run that has them."""
    folder = os.path.join(run_dir, CHECKPOINT_DIR)
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise RunError(read_error_message(exc, "cannot list the checkpoints in")) from None
    out = []
    for name in names:
        match = _NAME.match(name)
        if match:
            out.append((int(match.group(1)), os.path.join(folder, name)))
    return sorted(out)


def final_model_path(run_dir: str, suffix: str = ".zip") -> str:
    """``<run_dir>/model<suffix>``: the model a finished run published."""
    return os.path.join(run_dir, f"model{suffix}")


def publish_final_model(checkpoint: str, final: str) -> None:
    """Copy ``checkpoint`` (file or directory) to ``final`` atomically; an older ``final`` is replaced."""
    if os.path.islink(final):  # a link to a checkpoint, as older versions published it
        os.remove(final)
    if os.path.isdir(checkpoint):
        atomic_write(final, lambda tmp: shutil.copytree(checkpoint, tmp))
        return
    if os.path.isdir(final):
        shutil.rmtree(final)

    def copy(tmp: str) -> None:
        shutil.copyfile(checkpoint, tmp)
        shutil.copystat(checkpoint, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())

    atomic_write(final, copy)


def _complete_zip(path: str) -> bool:
    """True if ``path`` is a whole zip archive: its directory at the end, every member's checksum right."""
    try:
        with zipfile.ZipFile(path) as zf:
            # a bomb is whole as far as writes go: refused when it is loaded, never inflated here
            return not zip_is_sane(path) or zf.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return False


def _cut_short(path: str) -> bool:
    """True if ``path`` is a zip whose write was cut short: empty (its data never reached the disk), or a zip
    archive's start without its end. Anything else that is not a complete zip (a text file, another
    format) is no write of the kit's."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(4)
    except OSError:
        return False
    return start in (b"", b"PK\x03\x04") and not _complete_zip(path)


def unfinished_writes(run_dir: str) -> list[tuple[str, str]]:
    """What writes cut short left in ``run_dir`` and its ``checkpoints/``, as ``(path, why)``; reads only.

    - temporaries of atomic writes (``.model_<steps>_steps.tmp-<pid>.zip``, RLlib's ``....tmp-<pid>/``)
      of a process that no longer writes: a trainer killed while saving;
    - ``.zip`` checkpoints newer than the newest complete one whose write was cut short (empty, or a zip
      archive without its end: a power loss before the data reached the disk, a copy cut short): a resume
      starts from the newest complete one instead of failing. With no complete zip checkpoint at all, or
      with a newer file that is no zip (not the kit's), nothing named is listed.

    Empty while another live process holds the run's lock (its writes may be under way).
    """
    if lock_owner(run_dir) is not None:
        return []
    found = [
        (path, "a write cut short (its process was killed while saving)")
        for directory in (run_dir, os.path.join(run_dir, CHECKPOINT_DIR))
        for path in leftover_temporaries(directory)
    ]
    zips = [path for _, path in list_checkpoints(run_dir) if os.path.isfile(path) and path.endswith(".zip")]
    cut = []
    for path in reversed(zips):  # newest first: only those newer than the newest complete one are read
        if _complete_zip(path):
            why = f"not a complete zip archive (a write cut short); the newest complete is {path}"
            found += [(name, why) for name in cut]
            break
        if not _cut_short(path):
            break  # a file the kit did not write: left for the engine to name
        cut.append(path)
    return found


def discard_unfinished_writes(run_dir: str, found: list[tuple[str, str]] | None = None) -> list[str]:
    """Remove :func:`unfinished_writes` of ``run_dir`` (or the ``found`` list of them); one line per removal.

    A resume calls it holding the run's lock, after every check of the resume has passed, so a refused
    resume leaves the run dir as it was.
    """
    notes: list[str] = []
    for path, why in unfinished_writes(run_dir) if found is None else found:
        try:
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            notes.append(f"removed {path}: {why}")
        except FileNotFoundError:
            pass
        except OSError as exc:
            notes.append(f"could not remove {path} ({exc.strerror}): {why}; delete it by hand")
    return notes
