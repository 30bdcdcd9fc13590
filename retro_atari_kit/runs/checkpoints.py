"""Checkpoints of a run: ``checkpoints/model_<steps>_steps<suffix>``, and the final model.

The step count is in the name, so listing needs no engine. A checkpoint can be a file (SB3's ``.zip``) or a
directory (RLlib's). The final model is the last checkpoint published under a stable name as an independent
copy, written atomically: no hard link or symlink, so one damaged write (or a damaged checkpoint) never
takes both, and deleting ``checkpoints/`` keeps the final model.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

from retro_atari_kit.runs.files import atomic_write

CHECKPOINT_DIR = "checkpoints"
_NAME = re.compile(r"^model_(\d+)_steps(\.zip)?$")


def checkpoint_path(run_dir: str, steps: int, suffix: str = ".zip") -> str:
    """``<run_dir>/checkpoints/model_<steps>_steps<suffix>``."""
    return os.path.join(run_dir, CHECKPOINT_DIR, f"model_{int(steps)}_steps{suffix}")


def list_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """``[(steps, path), ...]`` of the run's checkpoints, oldest first."""
    out = []
    for path in glob.glob(os.path.join(run_dir, CHECKPOINT_DIR, "model_*_steps*")):
        match = _NAME.match(os.path.basename(path))
        if match:
            out.append((int(match.group(1)), path))
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
