"""RLlib hyperparameters as data: ``presets.yaml`` next to this file (one entry per algorithm and preset,
each number with its source), read here; overrides follow the kit's one rule (``apply_overrides``)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from retro_atari_kit.presets import apply_overrides
from retro_atari_kit.runs import RunError

ALGOS = ("ppo", "appo", "impala", "dqn")
PRESETS_FILE = Path(__file__).resolve().parent / "presets.yaml"

__all__ = ["ALGOS", "PRESETS_FILE", "get_preset", "list_presets", "with_overrides"]


@functools.cache
def _presets() -> dict[str, dict[str, dict[str, Any]]]:
    with open(PRESETS_FILE, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def list_presets(algo: str) -> list[str]:
    """The preset names of ``algo``."""
    return sorted(_presets().get(algo, {}))


def get_preset(algo: str, preset: str = "default") -> dict[str, Any]:
    """A copy of the hyperparameters of ``algo`` / ``preset``; RunError naming the choices otherwise."""
    data = _presets()
    if algo not in data:
        raise RunError(f"unknown algo {algo!r} for RLlib; choose one of {', '.join(ALGOS)}")
    if preset not in data[algo]:
        raise RunError(f"unknown preset {preset!r} for {algo}; choose one of {', '.join(data[algo])}")
    return copy.deepcopy(data[algo][preset])


def with_overrides(hyper: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``hyper`` with ``overrides`` applied (dotted keys reach into dicts, e.g.
    ``replay_buffer_config.capacity``); which keys are valid is checked when the config is built."""
    return apply_overrides(hyper, overrides)
