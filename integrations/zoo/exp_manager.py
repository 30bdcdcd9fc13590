"""rl-zoo3 treats RetroKit IDs as the Atari games they are: life-loss episodes, clipped rewards, true score
in ``info["episode"]``.

rl-zoo3 decides "Atari" by ale-py's entry point, so for a kit ID ``rl_zoo3.enjoy`` would print its own sum of
clipped rewards at every life loss as "Episode Reward", and evaluate deterministically. With
``ExperimentManager.is_atari`` true for kit IDs it does what it does for its own Atari envs: ``enjoy`` prints
``info["episode"]`` (the true game score, which SB3's ``Monitor`` passes on around a kit env, see
``retro_atari_kit.integrations.sb3.monitor``) once per real game, and plays and evaluates with sampled
actions.
The zoo adds no wrapper for it: wrappers come only from hyperparameters, and the kit's conf modules name none.
Run by ``retro_atari_kit._post_import`` once ``rl_zoo3.exp_manager`` is loaded (an entry point in
``pyproject.toml``).
"""

from __future__ import annotations

from types import ModuleType

KIT_PREFIX = "RetroKit/"


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
