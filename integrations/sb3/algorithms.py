"""The SB3 algorithms the kit trains: one registry (name -> class), used by presets, training and loading."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from retro_atari_kit.runs import RunError

ALGOS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "dqn": ("stable_baselines3", "DQN"),
    "qrdqn": ("sb3_contrib", "QRDQN"),
}
OFF_POLICY = ("dqn", "qrdqn")
# the kit's own learners, chosen by the preset key `fast_learner` (docs/sb3.md): algo -> (module, class)
FAST_LEARNERS: dict[str, tuple[str, str]] = {
    "ppo": ("retro_atari_kit.integrations.sb3.fast_ppo", "FastPPO"),
    "a2c": ("retro_atari_kit.integrations.sb3.fast_a2c", "FastA2C"),
}
FAST_LEARNER_OPTIONS = {"compile": (True, False, "auto"), "cuda_graphs": (True, False, "auto")}
_OPTIONS_HELP = ", ".join(f"{name}: true|false|auto" for name in FAST_LEARNER_OPTIONS)


def available_algos() -> list[str]:
    """Algorithms usable here (``qrdqn`` only with sb3-contrib installed)."""
    return [name for name, (module, _) in ALGOS.items() if importlib.util.find_spec(module) is not None]


def algo_class(algo: str) -> type:
    """The SB3 class of ``algo``; RunError for an unknown name or a missing package."""
    key = str(algo).lower()
    if key not in ALGOS:
        raise RunError(f"unknown algo {algo!r}; choose one of {', '.join(available_algos())}")
    module, name = ALGOS[key]
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        raise RunError(f"algo {key!r} needs {module}: pip install 'retro-atari-kit[contrib]'") from None


def constructor_params(algo: str) -> dict[str, inspect.Parameter]:
    """The keyword arguments of the algorithm's constructor (without ``self``, ``env``, ``**kwargs``)."""
    params = inspect.signature(algo_class(algo).__init__).parameters
    skip = ("self", "env", "kwargs", "_init_setup_model")
    return {name: p for name, p in params.items() if name not in skip}


def fast_learner_options(algo: str, value: Any) -> dict[str, Any] | None:
    """The options of the preset key ``fast_learner`` (``true``, ``false``/null or ``{compile: ...,
    cuda_graphs: ...}``):
    None when it is off, a dict of options when on; ValueError (one line saying what to write) otherwise."""
    if value is None or value is False:
        return None
    key = str(algo).lower()
    if key not in FAST_LEARNERS:
        raise ValueError(f"fast_learner: {key} has none (only {' and '.join(FAST_LEARNERS)} do); remove it")
    options = {} if value is True else value
    if not isinstance(options, dict):
        raise ValueError(f"fast_learner={value!r}: use true, false or {{{_OPTIONS_HELP}}}")
    for name, choice in options.items():
        if name not in FAST_LEARNER_OPTIONS or choice not in FAST_LEARNER_OPTIONS[name]:
            raise ValueError(f"fast_learner.{name}={choice!r}: the options are {_OPTIONS_HELP}")
    return dict(options)


def learner_class(algo: str, fast_learner: Any = None) -> tuple[type, dict[str, Any]]:
    """The class that trains ``algo`` (SB3's, or the kit's fast learner when the preset's ``fast_learner``
    is on) and the constructor arguments that option adds."""
    options = fast_learner_options(algo, fast_learner)
    if options is None:
        return algo_class(algo), {}
    module, name = FAST_LEARNERS[str(algo).lower()]
    return getattr(importlib.import_module(module), name), options
