"""Which training engine serves a run: ``sb3`` (default) or ``rllib``, loaded only when a command needs it.

An engine's ``prepare`` and ``prepare_resume`` are the run layer's one new-run and one resume check
(``retro_atari_kit.runs.startup.prepare_new_run``, ``runs.resume.prepare_resume``) given the engine's
``EngineRules``, so no engine can skip them.

An engine module provides ``prepare(spec, force)``, ``prepare_resume(run_dir, timesteps)``,
``train(config, run_dir, resume_from)``, ``load_model(path, device=..., algo=...)`` (an object with SB3's
``predict``), ``latest_model(run_dir) -> (path, steps)`` and ``export_model(run_dir, out_dir) -> (path,
steps)`` (a small copy of the final model for publishing).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from retro_atari_kit.cli._common import CliError, user_errors
from retro_atari_kit.runs.layout import ENGINES
from retro_atari_kit.runs.spec import TrainSpec

# every engine of the run layer's list, at integrations/<name>/training
ENGINE_MODULES = {name: f"retro_atari_kit.integrations.{name}.training" for name in ENGINES}
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


def prepare_new_run(spec: TrainSpec, force: bool) -> tuple[ModuleType, dict, str]:
    """Check ``spec`` and create its run dir and config with the engine it names.

    Returns ``(engine module, config, run_dir)``; any user error is one CliError line, nothing written.
    """
    backend = engine(spec.engine)
    with user_errors():
        config, run_dir = backend.prepare(spec, force=force)
    return backend, config, run_dir
