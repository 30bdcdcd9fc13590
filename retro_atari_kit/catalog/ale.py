"""ALE games: one per ROM that ale-py ships, and per-game facts (score-crop boxes).

ALE games come from the ROMs that ale-py ships; stable-retro games are listed from stable-retro's
integration folders (no emulator is started and no ROM is hashed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

NAMESPACE = "RetroKit"
VERSION = 0

# Rows and columns (top, bottom, left, right) of the 210x160 ALE screen that hold the playfield, i.e. the
# box kept by ``crop_score=True``: rows top:bottom and columns left:right. Each box removes the score /
# HUD and was derived from real frames (see tests/test_score_crop.py, which checks that two frames
# differing only in score become identical).
SCORE_CROP_BOXES: dict[str, tuple[int, int, int, int]] = {
    "Asteroids": (16, 210, 0, 160),  # both scores: rows 5-14
    "BeamRider": (18, 210, 0, 160),  # score: rows 10-16
    "Boxing": (25, 210, 0, 160),  # scores rows 5-11, clock rows 17-23
    "Breakout": (16, 210, 0, 160),  # score, lives, level: rows 5-14
    "Enduro": (0, 155, 0, 160),  # odometer and day/cars panel: rows 160-190
    "Freeway": (14, 210, 0, 160),  # both scores: rows 5-12
    "MontezumaRevenge": (15, 210, 0, 160),  # score: rows 6-13
    "MsPacman": (0, 172, 0, 160),  # lives, fruit and score: rows 172-193
    "Pong": (34, 194, 0, 160),  # scores rows 1-20 and the white bars above and below the court
    "Qbert": (15, 210, 0, 160),  # score: rows 6-14
    "Seaquest": (18, 210, 0, 160),  # score: rows 9-16
    "SpaceInvaders": (19, 210, 0, 160),  # both scores: rows 10-17
}


# ROMs that ale-py ships but that have no single-player mode, so ALE refuses to load them alone.
MULTIPLAYER_ONLY_ROMS = frozenset({"combat", "joust", "maze_craze", "warlords"})


@dataclass(frozen=True)
class AleGame:
    """An ALE game: ``rom`` is ale-py's snake_case id, ``name`` the CamelCase used in env IDs."""

    rom: str
    name: str

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v{VERSION}"


def rom_to_name(rom: str) -> str:
    """ale-py's snake_case ROM id to the CamelCase game name (``ms_pacman`` -> ``MsPacman``)."""
    return rom.title().replace("_", "")


@lru_cache(maxsize=1)
def ale_games() -> tuple[AleGame, ...]:
    """Every single-player game whose ROM ale-py ships, sorted by name."""
    import ale_py.roms

    games = (
        AleGame(rom, rom_to_name(rom))
        for rom in ale_py.roms.get_all_rom_ids()
        if rom not in MULTIPLAYER_ONLY_ROMS
    )
    return tuple(sorted(games, key=lambda g: g.name))


def ale_game(name: str) -> AleGame:
    """Look up an ALE game by CamelCase name; raises ``KeyError`` naming close matches."""
    for game in ale_games():
        if game.name == name:
            return game
    raise KeyError(f"unknown ALE game {name!r}")
