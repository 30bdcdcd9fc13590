"""Which games exist, their IDs and per-game facts. One module per backend: ``ale``, ``retro``."""

from retro_atari_kit.catalog.ale import NAMESPACE, SCORE_CROP_BOXES, AleGame, ale_game, ale_games
from retro_atari_kit.catalog.kinds import ENTRY_POINTS, env_kind, game_kind
from retro_atari_kit.catalog.retro import RetroGame, retro_game, retro_games

__all__ = [
    "ENTRY_POINTS",
    "NAMESPACE",
    "SCORE_CROP_BOXES",
    "AleGame",
    "RetroGame",
    "ale_game",
    "ale_games",
    "env_kind",
    "game_kind",
    "retro_game",
    "retro_games",
]
