"""The training engines a run can name, and what each tells the run layer.

:data:`ENGINE_REGISTRY` is the one static table of engines: name -> the module that implements it and the
command that installs its framework. The module paths are strings, imported by :func:`load_engine` only
when a command needs that engine, so the core loads no framework (``retrokit --help``, ``list``, ``plot``
load none); this is the only place the core names an integration.

A run's settings descend once, CLI -> run layer -> engine: the run layer alone runs the checks of a new run
and of a resume (``startup.prepare_new_run(spec, force)``, ``resume.prepare_resume(run_dir, timesteps)``),
taking the engine's part from its ``RULES`` (an :class:`EngineRules` of plain functions); no engine calls
back up into the run layer for those checks. An engine module provides:

- ``RULES``: its :class:`EngineRules`;
- ``train(config, run_dir, resume_from)``;
- ``load_model(path, device=..., algo=...)``: an object with SB3's ``predict``;
- ``latest_model(run_dir) -> (path, steps)`` and ``export_model(run_dir, out_dir) -> (path, steps)`` (a
  small copy of the final model for publishing).

The rules' functions only read: the run layer writes the run dir once every check has passed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from retro_atari_kit.errors import RunError

if TYPE_CHECKING:  # annotations only
    import gymnasium as gym

__all__ = [
    "ENGINES",
    "ENGINE_INTERFACE",
    "ENGINE_REGISTRY",
    "EngineEntry",
    "EngineRules",
    "SavedPolicy",
    "engine_rules",
    "load_engine",
]


@dataclass(frozen=True)
class EngineEntry:
    """Where an engine lives (``module``, imported lazily) and how to install what it needs (``install``)."""

    module: str
    install: str


# the one table of engines; a new engine is one line here (docs/architecture.md, "A new training engine")
ENGINE_REGISTRY: dict[str, EngineEntry] = {
    "sb3": EngineEntry("retro_atari_kit.integrations.sb3.training", "pip install retro-atari-kit"),
    "rllib": EngineEntry(
        "retro_atari_kit.integrations.rllib.training", 'pip install "retro-atari-kit[rllib]"'
    ),
}
ENGINES = tuple(ENGINE_REGISTRY)
# what every engine module provides (see the module docstring)
ENGINE_INTERFACE = ("RULES", "train", "load_model", "latest_model", "export_model")


def load_engine(name: str) -> ModuleType:
    """The engine module ``name``; RunError naming the choices, or the package to install when its import
    fails for a missing package."""
    entry = ENGINE_REGISTRY.get(name)
    if entry is None:
        raise RunError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    try:
        return importlib.import_module(entry.module)
    except ImportError as exc:
        raise RunError(
            f"the {name} engine needs a package that is missing ({exc.name}): {entry.install}"
        ) from None


def engine_rules(name: str) -> EngineRules:
    """The :class:`EngineRules` of the engine ``name`` (see :func:`load_engine`)."""
    return load_engine(name).RULES


@dataclass(frozen=True)
class SavedPolicy:
    """What a checkpoint says about the policy in it, as its engine reads it.

    ``algo`` is None when the file is a model of no algorithm the engine has; ``obs_dtype`` and
    ``n_actions`` are None when the engine does not store them.
    """

    algo: str | None
    obs_shape: tuple[int, ...]
    obs_dtype: str | None
    n_actions: int | None


@dataclass(frozen=True)
class EngineRules:
    """An engine's part of the run layer's checks.

    New run:

    - ``resolve(spec)``: the config written to ``config.yaml`` (preset, ``--set``, the engine's settings),
      with the engine's own checks of the spec (its algorithms, its options); builds no env.
    - ``check_env(config, env, force)``: the checks that need the env the config makes (``env``, built once by
      the run layer, closed by it), e.g. that the model builds and fits in memory; returns the lines to print
      before the run dir is written.

    Resume:

    - ``checkpoints(run_dir)``: ``[(steps, path)]`` of the checkpoints the engine can resume from, oldest
      first.
    - ``read_checkpoint(path)``: what the checkpoint holds; RunError if it cannot be read.
    - ``check_config(config, path)``: the engine's own fields of an (edited) ``config.yaml``; returns what
      ``check_checkpoint`` needs (or None).
    - ``check_checkpoint(path, config, checked)``: anything else the checkpoint must agree with (its network,
      its policy's construction); ``checked`` is what ``check_config`` returned.
    - ``check_load(path, config, obs_space, action_space)`` (optional): load everything ``train`` will load
      to resume from the checkpoint ``path`` (its weights, the state saved beside it such as a replay
      buffer) into what the config builds, and discard it: RunError, one line naming the file and what to
      do, if ``train`` could not. Run last, so that a resume ``train`` would refuse is refused before the
      run dir is written.
    - ``describe(config, run_dir)``: the lines a resume prints before it starts.

    Both: ``local_vector_env`` is True for an engine that runs the config's ``n_envs`` envs in one vector env
    of the training process (SB3): the run layer then checks that they fit this process's limits; False
    where the engine's workers make and check their own (RLlib's env runners).
    """

    name: str
    resolve: Callable[[Any], dict[str, Any]]  # a runs.spec.TrainSpec (spec imports this module's ENGINES)
    check_env: Callable[[dict[str, Any], gym.Env, bool], list[str]]
    checkpoints: Callable[[str], list[tuple[int, str]]]
    read_checkpoint: Callable[[str], SavedPolicy]
    check_config: Callable[[dict[str, Any], str], Any]
    check_checkpoint: Callable[[str, dict[str, Any], Any], None]
    describe: Callable[[dict[str, Any], str], list[str]]
    local_vector_env: bool = False
    check_load: Callable[[str, dict[str, Any], Any, Any], None] | None = None
