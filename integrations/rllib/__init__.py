"""Ray RLlib integration: RetroKit envs on every worker, ``KitRLModule``, ready Atari configs, run dirs.

Install with ``pip install "retro-atari-kit[rllib]"``. Installed as ``retro_atari_kit.integrations.rllib``
(its source is ``integrations/rllib/`` at the top level of the repository). It imports the core and Ray, never
another integration or the CLI; the run layer finds its training engine, ``training.py``, in
``retro_atari_kit.runs.engine.ENGINE_REGISTRY``. Names are imported lazily, so this package imports without
Ray; using a name that needs Ray without it raises one ImportError that says how to install it. See
docs/rllib.md.
"""

from __future__ import annotations

import importlib
from typing import Any

INSTALL = 'pip install "retro-atari-kit[rllib]"'

_EXPORTS = {
    "algo_config": "retro_atari_kit.integrations.rllib.config",
    "KitRLModule": "retro_atari_kit.integrations.rllib.module",
    "TrueScoreCallback": "retro_atari_kit.integrations.rllib.callbacks",
    "configure_env": "retro_atari_kit.integrations.rllib.envs",
    "worker_env_id": "retro_atari_kit.integrations.rllib.envs",
    "check_nodes": "retro_atari_kit.integrations.rllib.envs",
    "get_preset": "retro_atari_kit.integrations.rllib.hyperparams",
    "load_model": "retro_atari_kit.integrations.rllib.policy",
    "KitPolicy": "retro_atari_kit.integrations.rllib.policy",
    "train": "retro_atari_kit.integrations.rllib.training",
}

__all__ = sorted([*_EXPORTS, "require_ray"])


def require_ray() -> None:
    """ImportError in one line naming the install command if Ray RLlib is not installed."""
    try:
        import ray.rllib  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"Ray RLlib is not installed ({exc}); {INSTALL}") from None


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        if name not in ("load_model", "KitPolicy", "get_preset"):  # those work without Ray
            require_ray()
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
