"""Publishing a finished run: its record (config, progress table, log, true-score monitor CSVs) without the
checkpoints, beside a small final model that the engine writes (``retrokit export``). ``results/<name>/`` in
this repository holds such exports, and ``retrokit eval`` reads them as it reads any run dir."""

from __future__ import annotations

import os
import shutil

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


def copy_run_record(run_dir: str, out_dir: str) -> None:
    """Copy the record of ``run_dir`` (a kit run dir, else RunError) into ``out_dir`` (created)."""
    load_config(run_dir)
    os.makedirs(out_dir, exist_ok=True)
    for name in RECORD_FILES:
        src = os.path.join(run_dir, name)
        if os.path.isfile(src):
            shutil.copy2(src, os.path.join(out_dir, name))
    monitor = os.path.join(run_dir, MONITOR_DIR)
    if os.path.isdir(monitor):
        shutil.copytree(monitor, os.path.join(out_dir, MONITOR_DIR))
