"""Eval records: one JSON file per evaluated model, with the protocol's settings next to the scores, so
a score is never separated from how it was measured. ``retrokit eval`` writes them; ``retrokit report``
and :func:`read_records` read them."""

from __future__ import annotations

import datetime
import glob
import json
import math
import os
import re
from collections.abc import Callable
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


def trained_on(config: dict[str, Any]) -> dict[str, Any]:
    """A run's config.yaml as an eval record names what the run trained on: ``train_protocol`` (a run made
    before protocols were recorded trained under ``training``) and ``train_env_kwargs``."""
    return {
        "train_protocol": config.get("protocol") or "training",
        "train_env_kwargs": dict(config.get("env_kwargs") or {}),
    }


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
        # what the run trained on (None: a model file outside a run)
        **(trained_on(config) if config is not None else {"train_protocol": None, "train_env_kwargs": None}),
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


MAX_RECORD_BYTES = 64 << 20  # a record of 10,000 games is ~0.3 MB: a bigger file is not one of the kit's


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _kind_of(x: Any) -> str:
    """What a JSON value is, in the words of a message."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return f"the boolean {str(x).lower()}"
    if isinstance(x, str):
        return f"the text {x[:40]!r}"
    if isinstance(x, (int, float)):
        return f"the number {x:g}"
    return "a list" if isinstance(x, list) else "a mapping"


def _text(x: Any) -> bool:
    return isinstance(x, str) and x.strip() != ""


# what a game or a protocol name is made of: gymnasium's env IDs allow letters, digits, "_", ":", "." and "-"
_NAME = re.compile(r"[\w:.-]+")


def _name(x: Any) -> bool:
    return isinstance(x, str) and _NAME.fullmatch(x) is not None


class _ListOf:
    """A check of a list whose every item passes ``item_ok`` (and, with ``empty=False``, that has one)."""

    def __init__(self, item_ok: Callable[[Any], bool], empty: bool = True) -> None:
        self.item_ok, self.empty = item_ok, empty

    def __call__(self, x: Any) -> bool:
        return isinstance(x, list) and (self.empty or len(x) > 0) and all(self.item_ok(v) for v in x)

    def why(self, x: list) -> str:
        """What is wrong with the list ``x``, which failed the check."""
        bad = next((i for i, v in enumerate(x) if not self.item_ok(v)), None)
        return "an empty list" if bad is None else f"a list whose item {bad + 1} is {_kind_of(x[bad])}"


_scores = _ListOf(lambda s: _is_number(s) and math.isfinite(s), empty=False)
_whole_numbers = _ListOf(_is_int)


# field -> (required, check, what it must be). Fields the kit's writer always wrote are required where
# ``retrokit report`` cannot do without them; the others, where present, must have the writer's type (null
# where the writer writes null for "unknown").
SCHEMA: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "run": (True, _text, "a run name (text)"),
    "game": (True, _name, 'a game name (letters, digits, _ : . -), e.g. "Pong"'),
    "protocol": (True, lambda x: isinstance(x, dict), "a mapping of the protocol's settings"),
    "scores": (True, _scores, "a non-empty list of finite numbers, one per game"),
    "lengths": (False, _whole_numbers, "a list of whole numbers"),
    "model": (False, lambda x: isinstance(x, str), "a model path (text)"),
    "env_id": (False, lambda x: isinstance(x, str), "an env ID (text)"),
    "command": (False, lambda x: isinstance(x, str), "the command that made it (text)"),
    "created": (False, lambda x: isinstance(x, str), "a time (ISO 8601 text)"),
    "kit_version": (False, lambda x: isinstance(x, str), "a version (text)"),
    "engine": (False, lambda x: x is None or isinstance(x, str), "an engine name (text) or null"),
    "algo": (False, lambda x: x is None or isinstance(x, str), "an algorithm name (text) or null"),
    "network": (False, lambda x: x is None or isinstance(x, str), "a network name (text) or null"),
    "train_seed": (False, lambda x: x is None or _is_int(x), "a whole number or null"),
    "train_protocol": (False, lambda x: x is None or _name(x), "a protocol name or null"),
    "train_env_kwargs": (False, lambda x: x is None or isinstance(x, dict), "a mapping or null"),
    "steps": (False, lambda x: x is None or _is_int(x), "a whole number of agent steps or null"),
    "eval_seed": (False, _is_int, "a whole number"),
    "episodes": (False, _is_int, "a whole number"),
    "deterministic": (False, lambda x: isinstance(x, bool), "true or false"),
    "vector": (False, lambda x: isinstance(x, bool), "true or false"),
    "epsilon": (False, lambda x: _is_number(x) and 0 <= x <= 1, "a number from 0 to 1"),
    "action_map": (False, _whole_numbers, "a list of whole numbers"),
    "env_kwargs": (False, lambda x: isinstance(x, dict), "a mapping"),
    "mean": (False, lambda x: x is None or _is_number(x), "a number or null"),
    "std": (False, lambda x: x is None or _is_number(x), "a number or null"),
    "human_normalized_mean": (False, lambda x: x is None or _is_number(x), "a number or null"),
}
PROTOCOL_SCHEMA: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "protocol": (True, _name, 'the protocol\'s name (letters, digits, _ : . -), e.g. "machado"'),
    "frame_cap": (False, lambda x: x is None or _is_int(x), "a whole number of frames or null"),
    "env_kwargs": (False, lambda x: isinstance(x, dict), "a mapping"),
    "epsilon_value_based": (
        False,
        lambda x: x is None or (_is_number(x) and 0 <= x <= 1),
        "a number from 0 to 1",
    ),
}


def _check_fields(path: str, data: dict[str, Any], schema: dict, prefix: str = "") -> None:
    for name, (required, ok, what) in schema.items():
        field = f"'{prefix}{name}'"
        if name not in data:
            if required:
                raise RunError(
                    f"{path}: eval record without {field} (must be {what}); "
                    "evaluate again with retrokit eval --out"
                )
            continue
        value = data[name]
        if not ok(value):
            kind = ok.why(value) if isinstance(ok, _ListOf) and isinstance(value, list) else _kind_of(value)
            raise RunError(
                f"{path}: field {field} is {kind}, must be {what}; evaluate again with retrokit eval --out"
            )


def check_record(data: dict[str, Any], path: str) -> None:
    """RunError (one line naming ``path`` and the field) unless ``data`` has every field ``retrokit
    report`` reads, each of the type :func:`make_record` writes (:data:`SCHEMA`, :data:`PROTOCOL_SCHEMA`)."""
    _check_fields(path, data, SCHEMA)
    _check_fields(path, data["protocol"], PROTOCOL_SCHEMA, prefix="protocol.")


def read_record(path: str) -> dict[str, Any] | None:
    """The eval record at ``path``; None for a JSON file that is not one (no ``kind`` of the kit's). RunError
    for an unreadable one, or one whose fields are missing or of the wrong type (:func:`check_record`)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_RECORD_BYTES:
            raise RunError(
                f"{path}: {size >> 20} MB, larger than any eval record ({MAX_RECORD_BYTES >> 20} MB at "
                "most); pass the folders of eval records, not this file"
            )
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except RunError:
        raise
    except RecursionError:  # brackets nested thousands deep
        raise RunError(f"{path}: cannot read eval record (nested too deep)") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: cannot read eval record ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return None
    check_record(data, path)
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
