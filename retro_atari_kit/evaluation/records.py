"""Eval records: one JSON file per evaluated model, with the protocol's settings next to the scores, so
a score is never separated from how it was measured. ``retrokit eval`` writes them; ``retrokit report``
and :func:`read_records` read them."""

from __future__ import annotations

import datetime
import glob
import json
import os
from typing import Any

import numpy as np

from retro_atari_kit import __version__
from retro_atari_kit.errors import RunError
from retro_atari_kit.evaluation.scores import game_of, human_normalized
from retro_atari_kit.files import atomic_write

KIND = "retro-atari-kit eval"


def record_name(run: str, protocol: str) -> str:
    """``<run>.<protocol>.json``: one record per run and protocol in a folder."""
    return f"{run}.{protocol}.json"


def make_record(
    *,
    scores: list[float],
    lengths: list[int],
    env_id: str,
    protocol: dict[str, Any],
    env_kwargs: dict[str, Any],
    run: str,
    model: str,
    config: dict[str, Any] | None,
    steps: int | None,
    eval_seed: int,
    deterministic: bool,
    command: str,
    notes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one evaluation (see docs/evaluation.md for its fields)."""
    a = np.asarray(scores, dtype=np.float64)
    game = game_of(env_id)
    hns = human_normalized(game, float(a.mean())) if a.size else None
    cfg = config or {}
    return {
        "kind": KIND,
        "kit_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "run": run,
        "model": model,
        "env_id": env_id,
        "game": game,
        "engine": cfg.get("engine"),
        "algo": cfg.get("algo"),
        "network": cfg.get("network"),
        "train_seed": cfg.get("seed"),
        "steps": steps,
        "protocol": protocol,
        "env_kwargs": env_kwargs,
        "deterministic": deterministic,
        **(notes or {}),
        "eval_seed": eval_seed,
        "episodes": int(a.size),
        "scores": [float(s) for s in scores],
        "lengths": [int(n) for n in lengths],
        "mean": float(a.mean()) if a.size else None,
        "std": float(a.std()) if a.size else None,
        "human_normalized_mean": hns,
    }


def write_record(record: dict[str, Any], out_dir: str) -> str:
    """Write ``record`` atomically to ``out_dir/<run>.<protocol>.json``; returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, record_name(record["run"], record["protocol"]["protocol"]))
    text = json.dumps(record, indent=1) + "\n"

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_write(path, write)
    return path


def read_record(path: str) -> dict[str, Any] | None:
    """The eval record at ``path``; None for a JSON file that is not one. RunError for an unreadable one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: cannot read eval record ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return None
    if not data.get("scores"):
        raise RunError(f"{path}: eval record without scores; evaluate again with retrokit eval")
    data["path"] = path
    return data


def read_records(path: str) -> list[dict[str, Any]]:
    """Eval records of ``path``: a record file, a folder of records, or a run dir (its ``eval/`` folder)."""
    if os.path.isfile(path):
        rec = read_record(path)
        return [rec] if rec is not None else []
    found = []
    for pattern in ("*.json", os.path.join("eval", "*.json")):
        for p in sorted(glob.glob(os.path.join(glob.escape(path), pattern))):
            rec = read_record(p)
            if rec is not None:
                found.append(rec)
    return found
