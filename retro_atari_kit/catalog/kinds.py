"""Which emulator runs a game: the one answer to "ALE or stable-retro?" for every part of the kit."""

from __future__ import annotations

# emulator kind -> the entry point that builds one env of that kind (registered for every RetroKit/ ID)
ENTRY_POINTS = {
    "ale": "retro_atari_kit.envs.ale:make_ale_env",
    "retro": "retro_atari_kit.envs.retro:make_retro_env",
}

__all__ = ["ENTRY_POINTS", "env_kind", "game_kind"]


def game_kind(game: str) -> str:
    """``"ale"`` for an ALE game name (``Pong``), ``"retro"`` for a stable-retro one (``Pong-Atari2600``)."""
    if not isinstance(game, str) or not game:
        raise TypeError(f"game must be a non-empty str such as 'Pong' or 'Pong-Atari2600', got {game!r}")
    from retro_atari_kit.catalog.ale import ale_games

    if any(g.name == game for g in ale_games()):
        return "ale"
    if "-" in game:
        return "retro"
    raise ValueError(
        f"unknown game {game!r}: expected an ALE game name (e.g. 'Pong', 'Breakout') or a stable-retro "
        "game 'Name-System' (e.g. 'Pong-Atari2600'); see gymnasium.registry for the RetroKit/ IDs"
    )


def env_kind(env_id: str) -> str | None:
    """:func:`game_kind` of a registered ``RetroKit/`` ID's game; None for any other ID."""
    import gymnasium as gym

    spec = gym.registry.get(env_id.split(":", 1)[-1])
    game = spec.kwargs.get("game") if spec is not None else None
    if spec is None or spec.entry_point not in ENTRY_POINTS.values() or not isinstance(game, str):
        return None
    return game_kind(game)
