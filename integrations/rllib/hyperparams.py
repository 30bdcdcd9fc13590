"""RLlib hyperparameters as data: ``retro_atari_kit/presets/engines/rllib.yaml`` in the core (one entry
per algorithm and preset, each number with its source); overrides follow the kit's one rule
(``apply_overrides``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retro_atari_kit.presets import apply_overrides, engine_presets
from retro_atari_kit.runs import RunError

ALGOS = ("ppo", "appo", "impala", "dqn")

__all__ = ["ALGOS", "get_preset", "list_presets", "with_overrides"]


def list_presets(algo: str) -> list[str]:
    """The preset names of ``algo``."""
    return sorted(engine_presets("rllib").get(algo, {}))


def get_preset(algo: str, preset: str = "default") -> dict[str, Any]:
    """A copy of the hyperparameters of ``algo`` / ``preset``; RunError naming the choices otherwise."""
    data = engine_presets("rllib")
    if algo not in data:
        raise RunError(f"unknown algo {algo!r} for RLlib; choose one of {', '.join(ALGOS)}")
    if preset not in data[algo]:
        raise RunError(f"unknown preset {preset!r} for {algo}; choose one of {', '.join(data[algo])}")
    return data[algo][preset]


def with_overrides(hyper: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``hyper`` with ``overrides`` applied (dotted keys reach into dicts, e.g.
    ``replay_buffer_config.capacity``); which keys are valid is checked when the config is built."""
    return apply_overrides(hyper, overrides)
