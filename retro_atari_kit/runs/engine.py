"""What a training engine tells the run layer, so that the run layer alone runs the checks of a new run and
of a resume (``startup.prepare_new_run``, ``resume.prepare_resume``) and every engine only adapts.

An engine (``integrations/<name>/training``) builds one :class:`EngineRules` of plain functions; nothing here
imports an engine. The functions only read: the run layer writes the run dir once every check has passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from retro_atari_kit.runs.spec import TrainSpec

__all__ = ["EngineRules", "SavedPolicy"]


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
    - ``describe(config, run_dir)``: the lines a resume prints before it starts.
    """

    name: str
    resolve: Callable[[TrainSpec], dict[str, Any]]
    check_env: Callable[[dict[str, Any], gym.Env, bool], list[str]]
    checkpoints: Callable[[str], list[tuple[int, str]]]
    read_checkpoint: Callable[[str], SavedPolicy]
    check_config: Callable[[dict[str, Any], str], Any]
    check_checkpoint: Callable[[str, dict[str, Any], Any], None]
    describe: Callable[[dict[str, Any], str], list[str]]
