"""stable-retro games: one per integration folder in stable-retro's data directory.

Listing is cheap on purpose (it runs at ``import retro_atari_kit``): it reads folder names and checks that
each folder has a ``rom.sha`` file. stable-retro itself is not imported, no emulator is started and no ROM
is hashed. ROM status (``retro_atari_kit.roms.rom_status``) is computed on demand; the catalog never
imports the ROM module (it imports the catalog).

Integration sets: ``"stable"`` (registered by default), ``"contrib"`` and ``"experimental"`` (opt-in:
``register_all(include=("contrib", "experimental"))`` or the environment variable
``RETROKIT_RETRO_INTEGRATIONS=contrib,experimental`` set before ``import retro_atari_kit``). A game that
exists in several sets is listed once, from the first set in the order stable, contrib, experimental.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from retro_atari_kit.catalog.ale import NAMESPACE, VERSION
from retro_atari_kit.catalog.suggest import did_you_mean

INTEGRATIONS = ("stable", "contrib", "experimental")
ENV_VAR = "RETROKIT_RETRO_INTEGRATIONS"


@dataclass(frozen=True)
class RetroGame:
    """A stable-retro integration.

    ``name`` is ``<Game>-<System>`` as used in env IDs (``Pong-Atari2600``), ``folder`` the name of
    stable-retro's integration folder (``Pong-Atari2600-v0`` for stable games, no suffix for the others),
    which is also the game name stable-retro's own API expects; ``integration`` is its set.
    """

    name: str
    system: str
    integration: str
    folder: str

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v{VERSION}"

    @property
    def path(self) -> Path:
        """The integration folder (data.json, scenario.json, states, rom.sha and the ROM once imported)."""
        return retro_data_dir() / self.integration / self.folder

    def expected_sha1s(self) -> tuple[str, ...]:
        """The SHA-1 digests stable-retro accepts for this game's ROM (from ``rom.sha``)."""
        text = (self.path / "rom.sha").read_text()
        return tuple(line.strip().lower() for line in text.split() if line.strip())

    def rom_extension(self) -> str:
        """The file extension of the ROM stable-retro looks for, with the dot (``.a26``, ``.md``, ...)."""
        return system_extensions()[self.system][0]

    def rom_file(self) -> Path | None:
        """The installed ROM file, or None. Checks file names only, no hashing."""
        for ext in system_extensions().get(self.system, ()):
            candidate = self.path / f"rom{ext}"
            if candidate.is_file():
                return candidate
        return None

    def states(self) -> tuple[str, ...]:
        """Save-state names (without ``.state``) that ``state=`` accepts."""
        return tuple(
            sorted(p.name[: -len(".state")] for p in self.path.glob("*.state") if not p.name.startswith("_"))
        )


def retro_data_dir() -> Path:
    """stable-retro's data directory (``RETRO_DATA_PATH`` if set, as stable-retro does), found without
    importing stable-retro."""
    env = os.environ.get("RETRO_DATA_PATH")
    if env:
        return Path(env)
    return _package_data_dir()


@lru_cache(maxsize=1)
def _package_data_dir() -> Path:
    spec = importlib.util.find_spec("stable_retro")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("stable-retro is not installed; pip install stable-retro")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@lru_cache(maxsize=1)
def _core_info() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in sorted((_package_data_dir().parent / "cores").glob("*.json")):
        out.update(json.loads(path.read_text()))
    return out


def system_extensions() -> dict[str, tuple[str, ...]]:
    """ROM file extensions per system, read from stable-retro's core descriptions (``cores/*.json``)."""
    return {system: tuple("." + ext for ext in info.get("ext", ())) for system, info in _core_info().items()}


def system_buttons(system: str) -> tuple[str | None, ...]:
    """The console's buttons in stable-retro's order (``None`` marks an unused slot)."""
    try:
        return tuple(_core_info()[system]["buttons"])
    except KeyError:
        raise ValueError(
            f"unknown stable-retro system {system!r}; known: {', '.join(sorted(_core_info()))}"
        ) from None


def parse_include(include: Iterable[str] | str | None) -> tuple[str, ...]:
    """Normalise an integration selection to a tuple starting with ``"stable"``.

    ``None`` reads ``RETROKIT_RETRO_INTEGRATIONS`` (comma-separated, e.g. ``contrib,experimental``; ``all``
    means every set). ``"stable"`` is always included.
    """
    if include is None:
        include = os.environ.get(ENV_VAR, "")
    if isinstance(include, str):
        include = [part.strip() for part in include.split(",") if part.strip()]
    chosen = set(include)
    if "all" in chosen:
        chosen = set(INTEGRATIONS)
    unknown = sorted(chosen - set(INTEGRATIONS))
    if unknown:
        raise ValueError(
            f"unknown stable-retro integration set(s) {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(map(repr, INTEGRATIONS))} or 'all' (e.g. {ENV_VAR}=contrib,experimental)"
        )
    return tuple(s for s in INTEGRATIONS if s == "stable" or s in chosen)


def retro_games(include: Iterable[str] | str | None = ("stable",)) -> tuple[RetroGame, ...]:
    """Every stable-retro game of the chosen integration sets, sorted by name (cheap: no hashing).

    ``include=None`` follows ``RETROKIT_RETRO_INTEGRATIONS``; see :func:`parse_include`.
    """
    return scan_retro_games(parse_include(include), str(retro_data_dir()))


@lru_cache(maxsize=8)
def scan_retro_games(include: tuple[str, ...], data_dir: str) -> tuple[RetroGame, ...]:
    """Every game of the integration sets ``include`` under ``data_dir`` (cached; reads folder names only)."""
    games: dict[str, RetroGame] = {}
    for integration in include:
        base = os.path.join(data_dir, integration)
        try:
            entries = list(os.scandir(base))
        except FileNotFoundError:
            continue
        for entry in entries:
            if not entry.is_dir() or entry.name.startswith(("_", ".")):
                continue
            name = entry.name[: -len("-v0")] if entry.name.endswith("-v0") else entry.name
            if "-" not in name or name in games:
                continue
            if not os.path.exists(os.path.join(entry.path, "rom.sha")):
                continue
            system = name.rsplit("-", 1)[1]
            games[name] = RetroGame(name=name, system=system, integration=integration, folder=entry.name)
    return tuple(sorted(games.values(), key=lambda g: g.name))


def retro_game(name: str, include: Iterable[str] | str | None = INTEGRATIONS) -> RetroGame:
    """Look up a game by ``<Game>-<System>`` (``Pong-Atari2600``); ``KeyError`` names close matches."""
    for game in retro_games(include):
        if game.name == name:
            return game

    # names containing the text first (`Sonic` -> SonicTheHedgehog-Genesis, ...), then typos
    hint = did_you_mean(name, [g.name for g in retro_games(include)], more_hint=f"retrokit list {name}")
    raise KeyError(
        f"unknown stable-retro game {name!r} (expected <Game>-<System>, e.g. Pong-Atari2600){hint}"
    )
