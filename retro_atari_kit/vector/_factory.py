"""Which emulator a game uses, and how to build one per-env stack without its frame stack."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from retro_atari_kit.catalog.kinds import ENTRY_POINTS, game_kind  # noqa: F401  (re-exported)
from retro_atari_kit.errors import as_int
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK


@dataclass(frozen=True)
class EnvFactory:
    """Picklable recipe for one per-env stack: ``entry_point(game, frame_stack=1, **kwargs)``.

    Calling it imports ``retro_atari_kit`` first (gymnasium 1.x has no plugin autoload), so it works in
    ``fork``, ``forkserver`` and ``spawn`` workers alike.
    """

    game: str
    kind: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> gym.Env:
        import retro_atari_kit  # noqa: F401  (registers the RetroKit/ namespace in fresh processes)

        module, func = ENTRY_POINTS[self.kind].split(":")
        make = getattr(importlib.import_module(module), func)
        return make(self.game, frame_stack=1, **self.kwargs)


def split_frame_stack(kwargs: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Take ``frame_stack`` out of the env kwargs (it is done by the vector env) and validate it."""
    kwargs = dict(kwargs)
    given = kwargs.pop("frame_stack", DEFAULT_FRAME_STACK)
    k = as_int(given)  # numpy integers too
    if k is None or k < 1:
        raise ValueError(f"frame_stack must be an int >= 1, got {given!r}")
    return k, kwargs
