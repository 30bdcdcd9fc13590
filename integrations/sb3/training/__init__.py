"""``retrokit train`` on Stable-Baselines3, by concern:

- ``config``: preset + overrides -> the run's config; every validation that can fail on user input
- ``memory``: RAM / VRAM estimate checked before training
- ``models``: SB3 model files: atomic checkpoints, the final model, loading, small exports
- ``rules``: SB3's part of the run layer's one new-run and one resume check (``runs.engine.EngineRules``)
- ``callbacks``: stop on a signal, checkpoints, progress bar, periodic evaluation
- ``run``: train a new run or a resumed one

The run directory itself (config file, lock, monitor CSVs, progress merging) is ``retro_atari_kit.runs``,
and so are the checks of a new run and of a resume (``runs.startup.prepare_new_run``,
``runs.resume.prepare_resume``): the run layer finds this module in its engine table
(``runs.engine.ENGINE_REGISTRY``) and calls down into ``RULES``; nothing here calls back up. The engine
interface (``runs.engine.ENGINE_INTERFACE``): ``RULES``, ``train``, ``load_model``, ``latest_model``,
``export_model``.
"""

from retro_atari_kit.integrations.sb3.training.config import algo_kwargs, resolve_config
from retro_atari_kit.integrations.sb3.training.models import (
    export_model,
    latest_model,
    load_model,
    save_checkpoint,
)
from retro_atari_kit.integrations.sb3.training.rules import RULES
from retro_atari_kit.integrations.sb3.training.run import make_train_env, train

__all__ = [
    "RULES",
    "algo_kwargs",
    "export_model",
    "latest_model",
    "load_model",
    "make_train_env",
    "resolve_config",
    "save_checkpoint",
    "train",
]
