"""Checkpoints of a run: ``checkpoints/model_<steps>_steps<suffix>``, and the final model.

The step count is in the name, so listing needs no engine. A checkpoint can be a file (SB3's ``.zip``) or a
directory (RLlib's). The final model is the last checkpoint published under a stable name, as a hard link
(same bytes on disk once, survives deleting ``checkpoints/``) or, where links are impossible, a copy.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

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
    """Make ``final`` name the same model as ``checkpoint`` without storing it twice.

    Files: a hard link (atomic: linked under a temporary name, then renamed), a copy where the file system
    has no hard links. Directories: a relative symlink.
    """
    tmp = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.tmp-{os.getpid()}")
    if os.path.isdir(checkpoint):
        os.symlink(os.path.relpath(checkpoint, os.path.dirname(final)), tmp)
    else:
        try:
            os.link(checkpoint, tmp)
        except OSError:
            shutil.copy2(checkpoint, tmp)
    if os.path.isdir(final) and not os.path.islink(final):
        shutil.rmtree(final)
    os.replace(tmp, final)
