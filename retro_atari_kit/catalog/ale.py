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
SCORE_CROP_BOXES: dict[str, tuple[int, int, int, int]] = {}


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
    """Every game whose ROM ale-py ships, sorted by name."""
    import ale_py.roms

    return tuple(sorted((AleGame(rom, rom_to_name(rom)) for rom in ale_py.roms.get_all_rom_ids()),
                        key=lambda g: g.name))


def ale_game(name: str) -> AleGame:
    """Look up an ALE game by CamelCase name; raises ``KeyError`` naming close matches."""
    for game in ale_games():
        if game.name == name:
            return game
    raise KeyError(f"unknown ALE game {name!r}")
