"""Which games exist, their IDs and per-game facts. One module per backend: ``ale``, ``retro``."""

from retro_atari_kit.catalog.ale import NAMESPACE, SCORE_CROP_BOXES, AleGame, ale_game, ale_games

__all__ = ["NAMESPACE", "SCORE_CROP_BOXES", "AleGame", "ale_game", "ale_games"]
