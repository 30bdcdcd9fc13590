"""Hyperparameter presets as data: one YAML file per algorithm, one loader, one override rule.

Each ``<algo>.yaml`` holds ``zoo`` (rl-baselines3-zoo's Atari hyperparameters, exactly as the zoo has them)
and ``presets``: named entries built from a ``base`` (``zoo`` or another preset) plus ``set`` overrides
with dotted keys. Every engine reads them: the SB3 integration (``to_sb3_kwargs``), the rl-zoo3 modules
(``zoo_hyperparams``); RLlib, whose settings have other names, keeps its own in ``engines/rllib.yaml``
(``engine_presets``), with the same override rule. No framework is imported here.

::

    from retro_atari_kit.presets import apply_overrides, get_preset, parse_overrides

    hp = get_preset("ppo", "default")
    hp = apply_overrides(hp, parse_overrides(["n_steps=256", "policy_kwargs.net_arch=[64]"]))
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from retro_atari_kit.errors import RunError

_DIR = Path(__file__).resolve().parent
# every algorithm with a preset file (engines map the names to their own classes)
ALGORITHMS: tuple[str, ...] = tuple(sorted(p.stem for p in _DIR.glob("*.yaml")))

__all__ = [
    "ALGORITHMS",
    "PresetError",
    "apply_overrides",
    "engine_presets",
    "format_preset",
    "get_preset",
    "import_dotted",
    "list_presets",
    "parse_overrides",
    "preset_description",
    "zoo_hyperparams",
]


class PresetError(RunError, KeyError):
    """Unknown algorithm, preset or override key, or a malformed override. One line naming the fix."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@functools.cache
def _load(algo: str) -> dict[str, Any]:
    key = str(algo).lower()
    if key not in ALGORITHMS:
        raise PresetError(f"unknown algo {algo!r} for presets; choose one of {', '.join(ALGORITHMS)}")
    with open(_DIR / f"{key}.yaml", encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    resolved: dict[str, dict[str, Any]] = {}

    def resolve(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        if name == "zoo":
            return copy.deepcopy(data["zoo"])
        if name in seen:
            raise PresetError(f"{key}.yaml: preset {name!r} is its own base")
        if name not in resolved:
            entry = data["presets"][name]
            resolved[name] = apply_overrides(
                resolve(entry.get("base", "zoo"), (*seen, name)), entry.get("set", {})
            )
        return copy.deepcopy(resolved[name])

    presets = {name: resolve(name) for name in data["presets"]}
    descriptions = {name: entry.get("description", "") for name, entry in data["presets"].items()}
    return {"zoo": data["zoo"], "presets": presets, "descriptions": descriptions}


@functools.cache
def _engine_file(engine: str) -> dict[str, dict[str, dict[str, Any]]]:
    path = _DIR / "engines" / f"{engine}.yaml"
    if not path.is_file():
        raise PresetError(f"no presets for engine {engine!r}")
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def engine_presets(engine: str) -> dict[str, dict[str, dict[str, Any]]]:
    """``{algo: {preset: hyperparameters}}`` of an engine whose settings are not SB3 arguments (``rllib``:
    ``engines/rllib.yaml``, RLlib ``AlgorithmConfig`` names, each number with its source). A fresh copy."""
    return copy.deepcopy(_engine_file(engine))


def list_presets() -> dict[str, list[str]]:
    """Preset names per algorithm, e.g. ``{"ppo": ["default", "bf16", "gpu"], ...}``."""
    return {algo: list(_load(algo)["presets"]) for algo in ALGORITHMS}


def get_preset(algo: str, name: str = "default") -> dict[str, Any]:
    """A fresh copy of preset ``name`` of ``algo``; PresetError (a KeyError) names the allowed values."""
    presets = _load(algo)["presets"]
    if name not in presets:
        raise PresetError(f"unknown preset {name!r} for {algo.lower()}; choose one of {', '.join(presets)}")
    return copy.deepcopy(presets[name])


def preset_description(algo: str, name: str) -> str:
    """The one-line description of a preset."""
    return _load(algo)["descriptions"].get(name, "")


def zoo_hyperparams(algo: str) -> dict[str, Any]:
    """rl-baselines3-zoo's Atari hyperparameters for ``algo`` (dotted class paths as strings)."""
    return copy.deepcopy(_load(algo)["zoo"])


def format_preset(preset: Mapping[str, Any]) -> str:
    """The preset as YAML (keys in insertion order)."""
    return yaml.safe_dump(dict(preset), sort_keys=False, default_flow_style=False)


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["n_steps=256", "policy_kwargs.net_arch=[64]"]`` -> ``{"n_steps": 256, "policy_kwargs.net_arch":
    [64]}``; values are YAML (``1e-4``, ``lin_2.5e-4``, ``[64, 64]``, ``{eps: 1e-5}``)."""
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, str):
            raise PresetError(f"overrides must be 'key=value' strings, got {item!r}")
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PresetError(f"malformed override {item!r}; use key=value, e.g. learning_rate=2.5e-4")
        try:
            out[key] = _number_or_yaml(raw)
        except yaml.YAMLError:
            raise PresetError(f"malformed value in {item!r}; use YAML, e.g. [64, 64]") from None
    return out


# YAML 1.1 (PyYAML) reads "1e-4" as a string: a number without a dot before its exponent
_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _number_or_yaml(raw: str) -> Any:
    text = raw.strip()
    if not text:
        return None
    if _SCIENTIFIC.fullmatch(text):
        return float(text)
    return _numbers_inside(yaml.safe_load(text))


def _numbers_inside(value: Any) -> Any:
    """``1e-3`` inside a list or mapping (``lr=[[0, 1e-3]]``, ``{eps: 1e-5}``) as the number it is."""
    if isinstance(value, str) and _SCIENTIFIC.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [_numbers_inside(v) for v in value]
    if isinstance(value, dict):
        return {k: _numbers_inside(v) for k, v in value.items()}
    return value


def apply_overrides(
    preset: Mapping[str, Any], overrides: Mapping[str, Any], allowed: Collection[str] | None = None
) -> dict[str, Any]:
    """A new dict: ``preset`` with ``overrides`` applied key by key.

    A dotted key reaches into nested dicts (``policy_kwargs.optimizer_kwargs.eps``), creating them as
    needed. A dict value is merged into a dict already there; any other value replaces it. With
    ``allowed``, a top-level key outside it raises PresetError naming the closest allowed key.
    """
    out = copy.deepcopy(dict(preset))
    for key, value in overrides.items():
        parts = str(key).split(".")
        if not all(p.isidentifier() for p in parts):
            raise PresetError(f"malformed override key {key!r}; use names such as policy_kwargs.net_arch")
        if allowed is not None and parts[0] not in allowed:
            close = difflib.get_close_matches(parts[0], sorted(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise PresetError(f"unknown hyperparameter {parts[0]!r}{hint}")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise PresetError(f"override {key!r}: {part!r} is {child!r}, not a dict")
            node = child
        leaf = parts[-1]
        if isinstance(value, Mapping) and isinstance(node.get(leaf), dict):
            node[leaf] = apply_overrides(node[leaf], value)
        else:
            node[leaf] = copy.deepcopy(value)
    return out


def import_dotted(path: Any) -> Any:
    """``"torch.nn.ReLU"`` -> the object; anything that is not a string passes through."""
    if not isinstance(path, str):
        return path
    module, _, attr = path.rpartition(".")
    if not module:
        raise PresetError(f"cannot import {path!r}; use a dotted path such as 'torch.nn.ReLU'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        raise PresetError(f"cannot import {path!r}; check the dotted path") from None
