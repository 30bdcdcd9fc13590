"""Hyperparameter presets for SB3 on Atari / retro games: plain dicts, printable, overridable key by key.

::

    from stable_baselines3 import PPO
    from retro_atari_kit.integrations.sb3 import make_vec_env
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs

    hp = apply_overrides(get_preset("ppo"), ["n_steps=256", "policy_kwargs.net_arch=[64]"], algo="ppo")
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=hp["n_envs"])
    model = PPO(env=venv, **to_sb3_kwargs(hp, network="impala"))
    model.learn(hp["n_timesteps"])

``list_presets()`` -> ``{"ppo": ["default", "gpu"], "a2c": [...], "dqn": [..., "pong-dqn"], ...}``.
``format_preset(get_preset("dqn", "pong-dqn"))`` gives YAML; ``python -m
retro_atari_kit.integrations.sb3.presets`` prints them all. What each preset is and why: ``_data.py``.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from retro_atari_kit.integrations.sb3.presets._data import DESCRIPTIONS, PRESETS

__all__ = [
    "DESCRIPTIONS",
    "NON_SB3_KEYS",
    "apply_overrides",
    "format_preset",
    "get_preset",
    "list_presets",
    "schedule",
    "to_sb3_kwargs",
]

# Keys of a preset that are not SB3 constructor arguments (parallel_play: issue 18, read by training.py).
NON_SB3_KEYS = ("n_envs", "n_timesteps", "parallel_play")
SCHEDULE_KEYS = ("learning_rate", "clip_range", "clip_range_vf")
CLASS_KEYS = ("replay_buffer_class", "rollout_buffer_class")
POLICY_CLASS_KEYS = ("optimizer_class", "activation_fn", "features_extractor_class")
NETWORKS = {
    "nature": "retro_atari_kit.integrations.sb3.extractors.NatureCNN",
    "impala": "retro_atari_kit.integrations.sb3.extractors.ImpalaCNN",
}
_ALGO_CLASSES = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "dqn": ("stable_baselines3", "DQN"),
    "qrdqn": ("sb3_contrib", "QRDQN"),
}


def list_presets() -> dict[str, list[str]]:
    """Preset names per algorithm, e.g. ``{"ppo": ["default", "gpu"], ...}``."""
    return {algo: list(names) for algo, names in PRESETS.items()}


def get_preset(algo: str, name: str = "default") -> dict[str, Any]:
    """A fresh deep copy of preset ``name`` for ``algo`` (``ppo``, ``a2c``, ``dqn``, ``qrdqn``).

    Raises ``KeyError`` (a ``LookupError``) naming the allowed values for an unknown algo or name.
    """
    key = str(algo).lower()
    if key not in PRESETS:
        raise KeyError(f"unknown algo {algo!r} for presets; choose one of {', '.join(PRESETS)}")
    if name not in PRESETS[key]:
        raise KeyError(f"unknown preset {name!r} for {key}; choose one of {', '.join(PRESETS[key])}")
    return copy.deepcopy(PRESETS[key][name])


def format_preset(preset: Mapping[str, Any]) -> str:
    """The preset as YAML (keys in insertion order)."""
    return yaml.safe_dump(dict(preset), sort_keys=False, default_flow_style=False)


def schedule(value: Any) -> Any:
    """Turn a preset value into what SB3 expects: ``"lin_X"`` or ``{"schedule": "linear", "initial": X[,
    "final": Y]}`` -> a callable of SB3's ``progress_remaining`` (1 at the start, 0 at the end), linear from
    X to Y (default 0); numbers and callables pass through."""
    if callable(value) or value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    if isinstance(value, str):
        if value.startswith("lin_"):
            return _linear(_number(value[4:], value), 0.0)
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"cannot read schedule {value!r}; use a number or 'lin_<x>'") from None
    if isinstance(value, Mapping):
        if value.get("schedule") != "linear" or "initial" not in value or set(value) - {"schedule", "initial",
                                                                                         "final"}:
            raise ValueError(f"cannot read schedule {value!r}; use {{'schedule': 'linear', 'initial': x, "
                             "'final': y}} or 'lin_<x>'")
        return _linear(_number(value["initial"], value), _number(value.get("final", 0.0), value))
    raise ValueError(f"cannot read schedule {value!r}; use a number, 'lin_<x>' or "
                     "{'schedule': 'linear', 'initial': x}")


def _number(text: Any, whole: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read schedule {whole!r}: {text!r} is not a number") from None


class LinearSchedule:
    """``initial`` at the start of training, ``final`` at the end (picklable, unlike a closure)."""

    def __init__(self, initial: float, final: float) -> None:
        self.initial, self.final = initial, final

    def __call__(self, progress_remaining: float) -> float:
        return self.final + (self.initial - self.final) * progress_remaining

    def __repr__(self) -> str:
        return f"LinearSchedule({self.initial}, {self.final})"


def _linear(initial: float, final: float) -> LinearSchedule:
    return LinearSchedule(initial, final)


def _import(path: Any) -> Any:
    if not isinstance(path, str):
        return path
    module, _, attr = path.rpartition(".")
    if not module:
        raise ValueError(f"cannot import {path!r}; use a dotted path such as 'torch.nn.ReLU'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        raise ValueError(f"cannot import {path!r}; check the dotted path") from None


def to_sb3_kwargs(preset: Mapping[str, Any], network: str | None = "nature") -> dict[str, Any]:
    """Constructor kwargs for the SB3 class: drops ``n_envs`` / ``n_timesteps``, turns schedules into
    callables and dotted class paths into classes, and sets the kit's extractor ``network`` (``"nature"``
    or ``"impala"``; None leaves ``policy_kwargs`` as the preset has them, e.g. for your own
    ``features_extractor_class``). Use as ``PPO(env=venv, **to_sb3_kwargs(preset, network="impala"))``."""
    kw = copy.deepcopy(dict(preset))
    for key in NON_SB3_KEYS:
        kw.pop(key, None)
    for key in SCHEDULE_KEYS:
        if key in kw:
            kw[key] = schedule(kw[key])
    for key in CLASS_KEYS:
        if key in kw:
            kw[key] = _import(kw[key])
    pk = dict(kw.get("policy_kwargs") or {})
    if network is not None:
        if network not in NETWORKS:
            raise ValueError(f"unknown network {network!r}; choose one of {', '.join(NETWORKS)}")
        pk["features_extractor_class"] = NETWORKS[network]
    for key in POLICY_CLASS_KEYS:
        if key in pk:
            pk[key] = _import(pk[key])
    if pk or "policy_kwargs" in kw:
        kw["policy_kwargs"] = pk
    kw.setdefault("policy", "CnnPolicy")
    # a dotted class path (the kit's policy) is imported; SB3's aliases such as "CnnPolicy" stay strings
    if isinstance(kw["policy"], str) and "." in kw["policy"]:
        kw["policy"] = _import(kw["policy"])
    return kw


def _allowed_keys(algo: str | None, preset: Mapping[str, Any]) -> set[str]:
    allowed = set(preset) | set(NON_SB3_KEYS) | {"policy", "policy_kwargs"}
    if algo is None:
        return allowed
    key = algo.lower()
    if key not in _ALGO_CLASSES:
        raise ValueError(f"unknown algo {algo!r}; choose one of {', '.join(_ALGO_CLASSES)}")
    module, name = _ALGO_CLASSES[key]
    try:
        cls = getattr(importlib.import_module(module), name)
    except ImportError:
        raise ValueError(f"algo {algo!r} needs {module}: pip install sb3-contrib") from None
    params = inspect.signature(cls.__init__).parameters
    return allowed | {p for p in params if p not in ("self", "env", "kwargs", "_init_setup_model")}


def _parse_items(items: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"overrides must be 'key=value' strings or a dict, got {item!r}")
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"malformed override {item!r}; use key=value, e.g. learning_rate=2.5e-4")
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            raise ValueError(f"malformed value in override {item!r}; use YAML, e.g. [64, 64]") from None
    return out


def apply_overrides(
    preset: Mapping[str, Any],
    overrides: Mapping[str, Any] | Iterable[str],
    algo: str | None = None,
) -> dict[str, Any]:
    """A new preset with ``overrides`` applied key by key.

    ``overrides``: a dict or ``["key=value", ...]`` strings (values parsed as YAML: ``lin_2.5e-4``, ``1e-4``,
    ``[64, 64]``). Dotted keys reach into nested dicts (``policy_kwargs.optimizer_kwargs.eps=1e-5``).
    A top-level key must be in the preset, ``n_envs`` / ``n_timesteps`` / ``policy`` / ``policy_kwargs``,
    or (with ``algo``) a constructor argument of that SB3 class; otherwise ``ValueError`` names the key and
    the closest allowed one.
    """
    items = _parse_items(overrides) if not isinstance(overrides, Mapping) else dict(overrides)
    allowed = _allowed_keys(algo, preset)
    out = copy.deepcopy(dict(preset))
    for key, value in items.items():
        parts = str(key).split(".")
        if not all(p.isidentifier() for p in parts):
            raise ValueError(f"malformed override key {key!r}; use names such as policy_kwargs.net_arch")
        if parts[0] not in allowed:
            close = difflib.get_close_matches(parts[0], sorted(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            where = f" for {algo}" if algo else ""
            raise ValueError(f"unknown hyperparameter {parts[0]!r}{where}{hint}")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ValueError(f"override {key!r}: {part!r} is {child!r}, not a dict")
            node = child
        node[parts[-1]] = copy.deepcopy(value)
    return out


def _main() -> None:
    for algo, names in list_presets().items():
        for name in names:
            print(f"# {algo} / {name}: {DESCRIPTIONS.get(name, '')}")
            print(format_preset(get_preset(algo, name)))


