"""``retrokit train`` on Stable-Baselines3, by concern:

- ``config``: preset + overrides -> the run's config; every validation that can fail on user input
- ``memory``: RAM / VRAM estimate checked before training
- ``models``: SB3 model files: atomic checkpoints, the final model, loading, small exports
- ``rules``: SB3's part of the run layer's one new-run and one resume check (``runs.engine.EngineRules``)
- ``callbacks``: stop on a signal, checkpoints, progress bar, periodic evaluation
- ``run``: prepare a new run or a resume (the run layer's checks with SB3's rules), and train

The run directory itself (config file, lock, monitor CSVs, progress merging) is ``retro_atari_kit.runs``.
The engine interface the CLI calls: ``prepare``, ``prepare_resume``, ``train``, ``load_model``,
``latest_model``, ``export_model``.
"""

from retro_atari_kit.integrations.sb3.training.config import algo_kwargs, resolve_config
from retro_atari_kit.integrations.sb3.training.models import (
    export_model,
    latest_model,
    load_model,
    save_checkpoint,
)
from retro_atari_kit.integrations.sb3.training.run import make_train_env, prepare, prepare_resume, train

__all__ = [
    "algo_kwargs",
    "export_model",
    "latest_model",
    "load_model",
    "make_train_env",
    "prepare",
    "prepare_resume",
    "resolve_config",
    "save_checkpoint",
    "train",
]
