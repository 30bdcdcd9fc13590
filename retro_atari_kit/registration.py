"""Registration of the ``RetroKit/`` namespace with gymnasium (idempotent, no emulator started)."""

from __future__ import annotations

from collections.abc import Iterable

import gymnasium as gym

from retro_atari_kit.catalog import ale_games, retro_games

VECTOR_ENTRY_POINT = "retro_atari_kit.vector:make_vector_env"


def _register(env_id: str, entry_point: str, kwargs: dict) -> None:
    if env_id in gym.registry:  # re-import / reload: keep the existing spec, no override warning
        return
    gym.register(
        id=env_id,
        entry_point=entry_point,
        vector_entry_point=VECTOR_ENTRY_POINT,
        kwargs=kwargs,
        nondeterministic=False,
    )


def register_all(include: Iterable[str] | str | None = None) -> None:
    """Register every ALE game and every stable-retro integration under ``RetroKit/``.

    stable-retro's ``stable`` integrations are always registered; ``include`` adds ``"contrib"`` and/or
    ``"experimental"`` (or ``"all"``); ``None`` reads ``RETROKIT_RETRO_INTEGRATIONS`` (e.g.
    ``contrib,experimental``). Only folder names are read: no emulator is started, no ROM is hashed.
    """
    for game in ale_games():
        _register(game.env_id, "retro_atari_kit.envs.ale:make_ale_env", {"game": game.name})
    try:
        games = retro_games(include)
    except ImportError:  # stable-retro not installed: ALE IDs only
        games = ()
    for game in games:
        _register(game.env_id, "retro_atari_kit.envs.retro:make_retro_env", {"game": game.name})
