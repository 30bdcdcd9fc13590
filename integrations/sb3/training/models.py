"""SB3 model files of a run: atomic saves, checkpoints, and loading the right one with the right class."""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

from retro_atari_kit.integrations.sb3.algorithms import algo_class, available_algos

from retro_atari_kit.runs import (
    RunError,
    atomic_write,
    checkpoint_path,
    final_model_path,
    find_run_dir,
    list_checkpoints,
    load_config,
    publish_final_model,
)

REPLAY_FILE = "replay_buffer.pkl"


def save_checkpoint(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """Save ``checkpoints/model_<steps>_steps.zip`` atomically (and the replay buffer if asked)."""
    path = checkpoint_path(run_dir, int(model.num_timesteps))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, model.save)
    if save_replay and getattr(model, "replay_buffer", None) is not None:
        atomic_write(os.path.join(os.path.dirname(path), REPLAY_FILE), model.save_replay_buffer)
    return path


def save_final(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """The last checkpoint, published as ``model.zip`` (a hard link: stored once). Returns model.zip."""
    final = final_model_path(run_dir)
    publish_final_model(save_checkpoint(model, run_dir, save_replay), final)
    return final


def read_steps_of(model_zip: str) -> int | None:
    """``num_timesteps`` stored in an SB3 zip, or None if the file cannot be read as one."""
    try:
        with zipfile.ZipFile(model_zip) as zf:
            return int(json.loads(zf.read("data"))["num_timesteps"])
    except Exception:  # noqa: BLE001 - any damage means "unreadable"
        return None


def newest_readable_checkpoint(run_dir: str) -> tuple[int, str] | None:
    """``(steps, path)`` of the newest checkpoint whose zip can be read, or None."""
    for steps, path in reversed(list_checkpoints(run_dir)):
        if read_steps_of(path) is not None:
            return steps, path
    return None


def latest_model(run_dir: str) -> tuple[str, int]:
    """The model a finished or stopped run stands for: ``model.zip`` if present, else the newest checkpoint.

    Never silently falls back: an unreadable ``model.zip`` or newest checkpoint is a RunError naming it and
    the newest readable checkpoint to pass instead.
    """
    final = final_model_path(run_dir)
    checkpoints = list_checkpoints(run_dir)
    candidate = final if os.path.exists(final) else (checkpoints[-1][1] if checkpoints else None)
    if candidate is None:
        raise RunError(f"no model.zip or checkpoint in {run_dir}; train first (retrokit train ...)")
    steps = read_steps_of(candidate)
    if steps is None:
        readable = newest_readable_checkpoint(run_dir)
        fix = (
            f"pass {readable[1]} ({readable[0]} steps) instead"
            if readable
            else "no readable checkpoint is left"
        )
        raise RunError(f"cannot read {candidate}: not an SB3 model file; {fix}")
    return candidate, steps


def load_model(
    path: str, env: Any = None, device: str = "auto", algo: str | None = None, cls: type | None = None
) -> Any:
    """Load an SB3 zip with the class recorded in its run's config, or ``cls`` (RunError if unreadable)."""
    if algo is None:
        run = find_run_dir(path)
        algo = load_config(run)["algo"] if run else None
    if not zipfile.is_zipfile(path):
        raise RunError(f"cannot read checkpoint {path}: not an SB3 zip file; use an older checkpoint")
    last: Exception | None = None
    for name in [algo] if algo else available_algos():
        try:
            return (cls or algo_class(name)).load(path, env=env, device=device)
        except Exception as exc:  # noqa: BLE001 - report the cause in one line
            last = exc
    reason = str(last).splitlines()[0] if last else "?"
    raise RunError(f"cannot read checkpoint {path}: {reason}; use an older checkpoint in checkpoints/")
