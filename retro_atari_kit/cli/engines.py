"""Which training engine serves a run: ``sb3`` (default) or ``rllib``, loaded only when a command needs it.

An engine module provides ``prepare(spec, force)``, ``prepare_resume(run_dir, timesteps)``,
``train(config, run_dir, resume_from)``, ``load_model(path, device=..., algo=...)`` (an object with SB3's
``predict``) and ``latest_model(run_dir) -> (path, steps)``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from retro_atari_kit.cli._common import CliError

ENGINE_MODULES = {
    "sb3": "retro_atari_kit.integrations.sb3.training",
    "rllib": "retro_atari_kit.integrations.rllib.training",
}
INSTALL_HINTS = {"sb3": "pip install retro-atari-kit", "rllib": 'pip install "retro-atari-kit[rllib]"'}


def engine(name: str) -> ModuleType:
    """The engine module ``name``; CliError naming the choices or the package to install."""
    if name not in ENGINE_MODULES:
        raise CliError(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_MODULES)}")
    try:
        return importlib.import_module(ENGINE_MODULES[name])
    except ImportError as exc:
        raise CliError(
            f"the {name} engine needs a package that is missing ({exc.name}): {INSTALL_HINTS[name]}"
        ) from None
