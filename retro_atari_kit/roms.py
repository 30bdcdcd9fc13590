"""ROMs for stable-retro games: status, automatic install of ale-py's matching ROMs, and import from a folder.

A ROM belongs to a game when its SHA-1 is listed in the game's ``rom.sha`` (for NES files the 16-byte
iNES header is left out of the hash, as stable-retro does). Files are only ever installed after their
SHA-1 has been checked, and they are written atomically (a temporary file in the game folder, then
``os.replace``), so a corrupt or mismatched file never ends up where stable-retro looks.

Where ROMs go: ``<stable-retro data dir>/<integration>/<folder>/rom.<ext>``, the place stable-retro
itself looks (inside the installed package, so writable in a virtualenv without root).

Hashing happens on demand only (making an env, listing ROM status, importing) and is cached per process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from retro_atari_kit.catalog.retro import (
    INTEGRATIONS,
    RetroGame,
    retro_data_dir,
    retro_game,
    retro_games,
    scan_retro_games,
)
from retro_atari_kit.files import atomic_write_bytes

MAX_ROM_BYTES = 0x2000000  # 32 MiB, stable-retro's largest supported game
IMPORT_COMMAND = "retrokit import-roms DIR"


class RomNotFoundError(FileNotFoundError):
    """The ROM of a stable-retro game is not installed and cannot be installed automatically."""


@dataclass(frozen=True)
class ImportedRom:
    game: str  # <Game>-<System>
    source: str  # file (or archive:member) it came from
    destination: str  # installed file


@dataclass(frozen=True)
class SkippedFile:
    source: str
    reason: str


@dataclass
class ImportReport:
    """What :func:`import_roms` did: ``imported`` ROMs and ``skipped`` files, each with the reason."""

    imported: list[ImportedRom] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)


def rom_sha1(data: bytes, extension: str) -> str:
    """The SHA-1 stable-retro compares with ``rom.sha``: NES files without their 16-byte header."""
    if extension.lower() == ".nes":
        data = data[16:]
    return hashlib.sha1(data).hexdigest()


def _game(game: RetroGame | str) -> RetroGame:
    return game if isinstance(game, RetroGame) else retro_game(game)


# --- ale-py's Atari 2600 ROMs -------------------------------------------------------------------------


def _ale_rom_dir() -> Path | None:
    spec = importlib.util.find_spec("ale_py")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "roms"


@lru_cache(maxsize=1)
def ale_rom_hashes() -> dict[str, Path]:
    """SHA-1 -> ROM file for every ``.bin`` ale-py ships (hashed once per process, ~100 small files)."""
    folder = _ale_rom_dir()
    if folder is None:
        return {}
    return {hashlib.sha1(path.read_bytes()).hexdigest(): path for path in sorted(folder.glob("*.bin"))}


def ale_source(game: RetroGame | str) -> Path | None:
    """ale-py's ROM file whose SHA-1 matches ``game`` (Atari 2600 games only), or None."""
    game = _game(game)
    if game.system != "Atari2600":
        return None
    hashes = ale_rom_hashes()
    for sha in game.expected_sha1s():
        if sha in hashes:
            return hashes[sha]
    return None


# --- status ---------------------------------------------------------------------------------------------


def rom_status(game: RetroGame | str) -> str:
    """``"installed"`` (a ROM file is in place), ``"ale-py"`` (installed automatically from ale-py when the
    env is made) or ``"missing"`` (needs ``retrokit import-roms DIR``). Installed files are not re-hashed."""
    game = _game(game)
    if game.rom_file() is not None:
        return "installed"
    if ale_source(game) is not None:
        return "ale-py"
    return "missing"


def retro_rom_statuses(include=("stable",)) -> list[tuple[str, str]]:
    """``[(env_id, status), ...]`` for every stable-retro ID of the chosen integration sets (see
    :func:`rom_status`; ``include`` as in :func:`retro_atari_kit.catalog.retro.retro_games`)."""
    return [(game.env_id, rom_status(game)) for game in retro_games(include)]


# --- install --------------------------------------------------------------------------------------------


def install_rom(game: RetroGame | str, data: bytes) -> Path:
    """Install ``data`` as ``game``'s ROM after checking its SHA-1; returns the installed path.

    Raises ``ValueError`` (nothing is written) when the SHA-1 is not one the game accepts.
    """
    game = _game(game)
    ext = game.rom_extension()
    sha = rom_sha1(data, ext)
    expected = game.expected_sha1s()
    if sha not in expected:
        raise ValueError(
            f"not the {game.name} ROM: SHA-1 {sha}, expected {' or '.join(expected)}; nothing was installed"
        )
    destination = game.path / f"rom{ext}"
    atomic_write_bytes(str(destination), data)
    original = _original_rom_name(game)
    if original:  # FBNeo games also look for the ROM under its original file name
        atomic_write_bytes(str(game.path / original), data)
    return destination


def _original_rom_name(game: RetroGame) -> str | None:
    meta = game.path / "metadata.json"
    try:
        name = json.loads(meta.read_text()).get("original_rom_name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and name and os.path.basename(name) == name else None


def ensure_rom(game: RetroGame | str) -> Path:
    """Return ``game``'s installed ROM, installing ale-py's matching ROM first if that is possible.

    Raises :class:`RomNotFoundError` naming the game, the expected SHA-1 and the import command.
    """
    game = _game(game)
    existing = game.rom_file()
    if existing is not None:
        return existing
    source = ale_source(game)
    if source is not None:
        try:
            path = install_rom(game, source.read_bytes())
        except OSError as exc:
            raise RomNotFoundError(
                f"{game.env_id}: could not install ale-py's {source.name} as the {game.name} ROM into "
                f"{game.path} ({exc.strerror or exc}); make stable-retro's data folder writable or point "
                "RETRO_DATA_PATH at a writable copy of it"
            ) from exc
        print(
            f"retro-atari-kit: installed the {game.name} ROM from ale-py ({source.name}) into {path} "
            "(once; later runs use it directly)",
            file=sys.stderr,
        )
        return path
    raise RomNotFoundError(missing_rom_message(game))


def missing_rom_message(game: RetroGame | str) -> str:
    game = _game(game)
    shas = game.expected_sha1s()
    sha_text = shas[0] if len(shas) == 1 else " or ".join(shas)
    return (
        f"{game.env_id}: the ROM of {game.name} is not installed (expected a file with SHA-1 {sha_text}). "
        f"ROMs are not distributed with stable-retro; put your copy in a folder and run "
        f"`{IMPORT_COMMAND}` (files and zips are matched by SHA-1)."
    )


# --- import from a folder -------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _known_hashes(data_dir: str) -> dict[str, tuple[RetroGame, ...]]:
    known: dict[str, list[RetroGame]] = {}
    for integration in INTEGRATIONS:
        # each set on its own, so a game present in several sets gets the ROM in each of its folders
        for game in scan_retro_games((integration,), data_dir):
            try:
                shas = game.expected_sha1s()
            except OSError:
                continue
            for sha in shas:
                known.setdefault(sha, []).append(game)
    return {sha: tuple(games) for sha, games in known.items()}


def _candidates(root: Path):
    """Yield ``(label, bytes or None, reason)`` for every file under ``root`` and every member of zips."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        label = str(path)
        try:
            size = path.stat().st_size
        except OSError as exc:
            yield label, None, f"cannot read: {exc.strerror or exc}"
            continue
        if size > MAX_ROM_BYTES:
            yield label, None, "larger than 32 MiB, not a supported ROM"
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            yield label, None, f"cannot read: {exc.strerror or exc}"
            continue
        yield label, data, ""
        if zipfile.is_zipfile(path):
            try:
                with zipfile.ZipFile(path) as archive:
                    for info in archive.infolist():
                        member = f"{label}:{info.filename}"
                        if info.is_dir():
                            continue
                        if info.file_size > MAX_ROM_BYTES:
                            yield member, None, "larger than 32 MiB, not a supported ROM"
                            continue
                        try:
                            yield member, archive.read(info), ""
                        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
                            yield member, None, f"cannot extract: {exc}"
            except zipfile.BadZipFile as exc:
                yield label, None, f"corrupt zip archive: {exc}"


def import_roms(path: str | os.PathLike) -> ImportReport:
    """Import every ROM under ``path`` (a file or a folder, searched recursively; zip members too).

    Each file is hashed (SHA-1; NES files without their header) and installed into every stable-retro
    game whose ``rom.sha`` lists it, atomically. Everything else is reported in ``skipped`` with the
    reason (unknown SHA-1, already installed, unreadable, too big). A zip archive that is itself a ROM
    (arcade sets) is matched as a whole. ``~`` is expanded. Raises ``FileNotFoundError`` if ``path`` does
    not exist.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such file or folder; pass the folder that holds your ROM files")
    known = _known_hashes(str(retro_data_dir()))
    report = ImportReport()
    for label, data, reason in _candidates(root):
        if data is None:
            report.skipped.append(SkippedFile(label, reason))
            continue
        games = known.get(hashlib.sha1(data).hexdigest(), ()) + known.get(rom_sha1(data, ".nes"), ())
        games = tuple(
            g for g in dict.fromkeys(games) if rom_sha1(data, g.rom_extension()) in g.expected_sha1s()
        )
        if not games:
            if label.lower().endswith(".zip") and zipfile.is_zipfile(label):
                report.skipped.append(SkippedFile(label, "zip archive: its members were checked one by one"))
            else:
                report.skipped.append(
                    SkippedFile(
                        label, f"no stable-retro game has this SHA-1 ({hashlib.sha1(data).hexdigest()})"
                    )
                )
            continue
        for game in games:
            existing = game.rom_file()
            if (
                existing is not None
                and rom_sha1(existing.read_bytes(), existing.suffix) in game.expected_sha1s()
            ):
                report.skipped.append(SkippedFile(label, f"{game.name}: already installed at {existing}"))
                continue
            try:
                destination = install_rom(game, data)
            except OSError as exc:
                report.skipped.append(
                    SkippedFile(label, f"{game.name}: cannot write {game.path}: {exc.strerror or exc}")
                )
                continue
            report.imported.append(ImportedRom(game.name, label, str(destination)))
    return report


def format_import_report(report: ImportReport) -> str:
    """Human-readable summary of an :class:`ImportReport`: imported ROMs, then skipped files with reasons."""
    lines = []
    for item in report.imported:
        lines.append(f"imported  {item.game:<40} from {item.source}")
    for item in report.skipped:
        lines.append(f"skipped   {item.source}: {item.reason}")
    lines.append(f"{len(report.imported)} ROM(s) imported, {len(report.skipped)} file(s) skipped")
    return "\n".join(lines)
