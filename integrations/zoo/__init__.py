"""Hyperparameters for rl-zoo3, one module per algorithm, keyed by every ``RetroKit/`` ID.

::

    python -m rl_zoo3.train --algo ppo --env RetroKit/Pong-v0 --gym-packages retro_atari_kit \\
        --conf-file retro_atari_kit.integrations.zoo.ppo

The numbers are rl-zoo3's own Atari hyperparameters, read from the kit's preset files
(``retro_atari_kit.presets.zoo_hyperparams``); the one class they name, A2C's optimizer, is the engine-neutral
``rmsprop-tf-like`` there and SB3's ``RMSpropTFLike`` here, as rl-zoo3 has it (the SB3 integration's class
table, ``retro_atari_kit.integrations.sb3.presets.CLASSES``: rl-zoo3 runs SB3, so this adapter builds on it).
The kit's env already is the full DeepMind stack (no-op reset, max-and-skip, episodic life, fire reset, 84x84
gray, reward clip, 4-frame stack, uint8 channel-first). The zoo adds ``AtariWrapper`` and ``VecFrameStack``
only for envs whose entry point is ale-py's ``AtariEnv`` or whose hyperparameters name ``env_wrapper`` /
``frame_stack``; RetroKit IDs have neither, so no second stack is added. See docs/cli.md.

Installed as ``retro_atari_kit.integrations.zoo`` (its source is ``integrations/zoo/`` at the top level of the
repository). It imports the core and the SB3 integration it is built on, never another integration or the
CLI; no module of the kit imports it (rl-zoo3 does, by the ``--conf-file`` name above).
"""

from __future__ import annotations

import copy
from typing import Any

# rl-zoo3 trains SB3's algorithms: the presets' class names resolve through the SB3 integration's one table
from retro_atari_kit.integrations.sb3.presets import resolve_class

from retro_atari_kit.presets import zoo_hyperparams

CLASS_KEYS = ("optimizer_class", "activation_fn", "features_extractor_class")


def retrokit_ids() -> list[str]:
    """Every registered ``RetroKit/`` env ID (importing the package registers them)."""
    import gymnasium as gym

    import retro_atari_kit  # noqa: F401

    return sorted(k for k in gym.registry if k.startswith("RetroKit/"))


def hyperparams_for_all(algo: str) -> dict[str, dict[str, Any]]:
    """``{env_id: rl-zoo3's Atari hyperparameters for algo}`` for every RetroKit ID, each its own copy
    (the zoo mutates the dict it gets); class names in ``policy_kwargs`` resolved to classes."""
    base = zoo_hyperparams(algo)
    for key in ("env_wrapper", "frame_stack"):
        if key in base:
            raise ValueError(f"zoo hyperparameters must not set {key!r}: the kit's env already stacks frames")
    policy_kwargs = base.get("policy_kwargs", {})
    for key in CLASS_KEYS:
        if key in policy_kwargs:
            policy_kwargs[key] = resolve_class(key, policy_kwargs[key])
    return {env_id: copy.deepcopy(base) for env_id in retrokit_ids()}
