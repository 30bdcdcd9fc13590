"""Publishing a finished run: its record (config, progress table, log, true-score monitor CSVs) without the
checkpoints, beside a small final model that the engine writes (``retrokit export``). ``results/<name>/`` in
this repository holds such exports, and ``retrokit eval`` reads them as it reads any run dir."""

from __future__ import annotations

import os
import shutil
import stat

from retro_atari_kit.errors import RunError
from retro_atari_kit.runs.layout import CONFIG_FILE, MONITOR_DIR, load_config

#: files of a run dir that document it (the rest is checkpoints, tensorboard events and locks)
RECORD_FILES = (CONFIG_FILE, "progress.csv", "log.txt", "evaluations.csv")


def check_export_target(out_dir: str) -> None:
    """RunError unless ``out_dir`` can receive an export: missing or an empty directory."""
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise RunError(f"{out_dir} exists and is not an empty directory; pick a new export dir")
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):
        raise RunError(f"{parent} does not exist; create it first or pick another export dir")
    if not os.access(parent, os.W_OK):
        raise RunError(f"{parent} is not writable; pick another export dir")


def _link_error(path: str) -> RunError:
    target = os.readlink(path)
    gone = "" if os.path.exists(path) else ", which does not exist"
    return RunError(
        f"{path} is a link to {target}{gone}; export copies only regular files the kit wrote inside the run "
        "dir: remove the link (or replace it with the file itself)"
    )


def check_regular_inside(run_dir: str, path: str) -> None:
    """RunError unless ``path`` is a regular file inside ``run_dir`` reached through no link: what a run
    dir from someone else may hold is published only if the kit could have written it there."""
    root = os.path.realpath(run_dir)
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(run_dir))
    if rel.startswith(os.pardir):
        raise RunError(f"{path} is outside {run_dir}; export copies only files inside the run dir")
    current = run_dir  # as the user wrote it, for the message
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise _link_error(current)
    if not os.path.realpath(path).startswith(root + os.sep):
        raise RunError(f"{path} resolves outside {run_dir}; export copies only files inside the run dir")
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise RunError(f"{path} is not a regular file; export copies only regular files the kit wrote")


def _copy_regular(src: str, dst: str) -> None:
    """Copy the regular file ``src`` (opened without following a link: one swapped in after the checks is
    refused by the kernel) to ``dst``, with its times."""
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise RunError(f"{src} is not a regular file; export copies only regular files the kit wrote")
        with open(dst, "wb") as out:
            shutil.copyfileobj(fh, out)
    shutil.copystat(src, dst, follow_symlinks=False)


def copy_run_record(run_dir: str, out_dir: str) -> None:
    """Copy the record of ``run_dir`` (a kit run dir, else RunError) into ``out_dir`` (created): regular
    files only, none reached through a link (RunError naming the link: nothing outside the run dir is
    published)."""
    load_config(run_dir)
    sources: list[tuple[str, str]] = []
    for name in RECORD_FILES:
        src = os.path.join(run_dir, name)
        if os.path.islink(src):
            raise _link_error(src)
        if os.path.isfile(src):
            sources.append((src, name))
    monitor = os.path.join(run_dir, MONITOR_DIR)
    if os.path.islink(monitor):
        raise _link_error(monitor)
    if os.path.isdir(monitor):
        for folder, dirs, files in os.walk(monitor):  # links to folders are listed in dirs, not followed
            for name in sorted(dirs + files):
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    raise _link_error(path)
            for name in sorted(files):
                path = os.path.join(folder, name)
                check_regular_inside(run_dir, path)
                sources.append((path, os.path.relpath(path, run_dir)))
    os.makedirs(out_dir, exist_ok=True)
    for src, rel in sources:
        os.makedirs(os.path.dirname(os.path.join(out_dir, rel)), exist_ok=True)
        _copy_regular(src, os.path.join(out_dir, rel))
