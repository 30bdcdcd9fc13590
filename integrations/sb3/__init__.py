"""Stable-Baselines3 integration: feature extractors, the vec-env launcher, compact replay, presets.

Installed as ``retro_atari_kit.integrations.sb3`` (its source is ``integrations/sb3/`` at the top level of the
repository). It imports the core and SB3, never another integration or the CLI; the run layer finds its
training engine, ``training/``, in ``retro_atari_kit.runs.engine.ENGINE_REGISTRY``. Names are imported
lazily so ``import retro_atari_kit.integrations.sb3`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "NatureCNN": "retro_atari_kit.integrations.sb3.extractors",
    "ImpalaCNN": "retro_atari_kit.integrations.sb3.extractors",
    "cnn_policy_kwargs": "retro_atari_kit.integrations.sb3.extractors",
    "CompactReplayBuffer": "retro_atari_kit.integrations.sb3.buffers",
    "ChannelsLastRolloutBuffer": "retro_atari_kit.integrations.sb3.rollout_buffer",
    "KitCnnPolicy": "retro_atari_kit.integrations.sb3.policies",
    "KitDQNPolicy": "retro_atari_kit.integrations.sb3.policies",
    "native_bf16": "retro_atari_kit.integrations.sb3.extractors",
    "make_vec_env": "retro_atari_kit.integrations.sb3.launcher",
    "get_preset": "retro_atari_kit.integrations.sb3.presets",
    "list_presets": "retro_atari_kit.integrations.sb3.presets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
