"""The SB3 algorithms the kit trains: one registry (name -> class), used by presets, training and loading."""

from __future__ import annotations

import importlib
import inspect

from retro_atari_kit.runs import RunError

ALGOS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "dqn": ("stable_baselines3", "DQN"),
    "qrdqn": ("sb3_contrib", "QRDQN"),
}
OFF_POLICY = ("dqn", "qrdqn")


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
