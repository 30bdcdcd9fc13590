"""rl-zoo3 treats RetroKit IDs as the Atari games they are: life-loss episodes, clipped rewards, true score
in ``info["episode"]``.

rl-zoo3 decides "Atari" by ale-py's entry point, so for a kit ID ``rl_zoo3.enjoy`` would print its own sum of
clipped rewards at every life loss as "Episode Reward", and evaluate deterministically. With
``ExperimentManager.is_atari`` true for kit IDs it does what it does for its own Atari envs: ``enjoy`` prints
``info["episode"]`` (the true game score, which SB3's ``Monitor`` passes on around a kit env, see
``retro_atari_kit.integrations.sb3.monitor``) once per real game, and plays and evaluates with sampled
actions.
The zoo adds no wrapper for it: wrappers come only from hyperparameters, and the kit's conf modules name none.

Without ``--conf-file`` the zoo reads its own ``hyperparams/<algo>.yml``, whose ``atari`` entry (taken for
every ID ``is_atari`` accepts) names ``AtariWrapper`` and ``frame_stack: 4``: a second DeepMind stack around
the kit's finished one, which fails in OpenCV. So for a kit ID, ``read_hyperparameters`` reads the kit's conf
module instead of the zoo's own files (one line says so), or, for an algorithm the kit has no conf module
for, ends in one line naming ``--conf-file``.
Run by ``retro_atari_kit._post_import`` once ``rl_zoo3.exp_manager`` is loaded (an entry point in
``pyproject.toml``).
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType
from typing import Any

KIT_PREFIX = "RetroKit/"
CONF_MODULE = "retro_atari_kit.integrations.zoo.{algo}"  # the kit's hyperparameters, one module per algorithm


def adapt(module: ModuleType) -> None:
    """``rl_zoo3.exp_manager``: ``ExperimentManager.is_atari`` is also true for ``RetroKit/`` IDs."""
    cls = module.ExperimentManager
    original = cls.__dict__["is_atari"].__func__
    if getattr(original, "_retrokit", False):
        return

    def is_atari(env_id: str) -> bool:
        return KIT_PREFIX in str(env_id) or original(env_id)

    is_atari.__doc__ = original.__doc__
    is_atari._retrokit = True
    cls.is_atari = staticmethod(is_atari)
    _adapt_read_hyperparameters(cls, os.path.join(os.path.dirname(module.__file__), "hyperparams"))


def _adapt_read_hyperparameters(cls: type, zoo_files: str) -> None:
    """``read_hyperparameters`` of a kit ID reads the kit's conf module, never the zoo's own Atari entry."""
    read = cls.__dict__.get("read_hyperparameters")
    if read is None or getattr(read, "_retrokit", False):
        return

    def read_hyperparameters(self: Any) -> Any:
        config, algo = getattr(self, "config", None), getattr(self, "algo", "")
        env_id = str(getattr(self.env_name, "gym_id", self.env_name))  # huggingface_sb3's EnvironmentName
        if KIT_PREFIX in env_id and isinstance(config, str) and _is_under(config, zoo_files):
            self.config = _kit_conf_module(algo, env_id, config)
            print(
                f"retro-atari-kit: {env_id} is the kit's finished stack; hyperparameters from --conf-file "
                f"{self.config} (rl-zoo3's own {os.path.basename(config)} would wrap it a second time)"
            )
        return read(self)

    read_hyperparameters.__doc__ = read.__doc__
    read_hyperparameters._retrokit = True  # type: ignore[attr-defined]
    cls.read_hyperparameters = read_hyperparameters


def _is_under(path: str, folder: str) -> bool:
    return os.path.dirname(os.path.realpath(path)) == os.path.realpath(folder)


def _kit_conf_module(algo: str, env_id: str, config: str) -> str:
    """The kit's conf module for ``algo``; SystemExit in one line (no traceback) where the kit has none."""
    name = CONF_MODULE.format(algo=algo)
    if importlib.util.find_spec(name) is None:
        raise SystemExit(
            f"retro-atari-kit: {env_id} with --algo {algo}: the kit has no rl-zoo3 hyperparameters for "
            f"{algo}, and rl-zoo3's own {os.path.basename(config)} would stack frames around the kit's "
            "finished stack a second time: pass --conf-file with hyperparameters keyed by the RetroKit ID "
            "that set neither env_wrapper nor frame_stack (or use --algo ppo, a2c or dqn)"
        )
    return name
