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
Run by ``retro_atari_kit.adapters`` once ``rl_zoo3.exp_manager`` is loaded (an entry point in
``pyproject.toml``), after its guard has checked the rl-zoo3 version and the names used below; both
replacements call rl-zoo3's own method.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from retro_atari_kit.adapters import Adapter, marked

KIT_PREFIX = "RetroKit/"
CONF_MODULE = "retro_atari_kit.integrations.zoo.{algo}"  # the kit's hyperparameters, one module per algorithm


def _is_atari(original):
    """rl-zoo3's own ``is_atari``, also true for ``RetroKit/`` IDs."""

    def is_atari(env_id: str) -> bool:
        return KIT_PREFIX in str(env_id) or original(env_id)

    is_atari.__doc__ = original.__doc__
    return staticmethod(marked(is_atari))


def _read_hyperparameters(read):
    """rl-zoo3's own ``read_hyperparameters``; for a kit ID whose config is the zoo's own file, it reads the
    kit's conf module instead (its own Atari entry would wrap the kit's finished stack a second time)."""

    zoo_files = os.path.join(os.path.dirname(sys.modules[read.__module__].__file__), "hyperparams")

    def read_hyperparameters(self: Any) -> Any:
        config, algo = self.config, self.algo
        env_id = str(getattr(self.env_name, "gym_id", self.env_name))  # huggingface_sb3's EnvironmentName
        if KIT_PREFIX in env_id and isinstance(config, str) and _is_under(config, zoo_files):
            self.config = _kit_conf_module(algo, env_id, config)
            print(
                f"retro-atari-kit: {env_id} is the kit's finished stack; hyperparameters from --conf-file "
                f"{self.config} (rl-zoo3's own {os.path.basename(config)} would wrap it a second time)"
            )
        return read(self)

    read_hyperparameters.__doc__ = read.__doc__
    return marked(read_hyperparameters)


#: ``rl_zoo3.exp_manager`` (entry point in pyproject.toml)
EXP_MANAGER = Adapter(
    "rl-zoo3",
    ("2.7", "2.10"),
    requires=(
        "ExperimentManager.is_atari",
        "ExperimentManager.read_hyperparameters",
        *(f"ExperimentManager().{name}" for name in ("config", "algo", "env_name")),
    ),
    loses=(
        "rl-zoo3 treats RetroKit IDs as non-Atari envs: enjoy prints per-life clipped sums, not the kit's "
        "true game scores, and without --conf-file its own hyperparameters wrap the kit's stack a second time"
    ),
    patches=lambda module: [
        (module.ExperimentManager, "is_atari", _is_atari),
        (module.ExperimentManager, "read_hyperparameters", _read_hyperparameters),
    ],
)


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
