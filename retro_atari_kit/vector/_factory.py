"""Which emulator a game uses, and how to build one per-env stack without its frame stack."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

ENTRY_POINTS = {
    "ale": "retro_atari_kit.envs.ale:make_ale_env",
    "retro": "retro_atari_kit.envs.retro:make_retro_env",
}
DEFAULT_FRAME_STACK = 4


def game_kind(game: str) -> str:
    """``"ale"`` for an ALE game name (``Pong``), ``"retro"`` for a stable-retro one (``Pong-Atari2600``)."""
    if not isinstance(game, str) or not game:
        raise TypeError(f"game must be a non-empty str such as 'Pong' or 'Pong-Atari2600', got {game!r}")
    from retro_atari_kit.catalog import ale_games

    if any(g.name == game for g in ale_games()):
        return "ale"
    if "-" in game:
        return "retro"
    raise ValueError(
        f"unknown game {game!r}: expected an ALE game name (e.g. 'Pong', 'Breakout') or a stable-retro "
        "game 'Name-System' (e.g. 'Pong-Atari2600'); see gymnasium.registry for the RetroKit/ IDs"
    )


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
    k = kwargs.pop("frame_stack", DEFAULT_FRAME_STACK)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"frame_stack must be an int >= 1, got {k!r}")
    return k, kwargs
