"""``retrokit list``: every RetroKit ID with its ROM status."""

from __future__ import annotations

import argparse

from retro_atari_kit.cli._common import CliError


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="every RetroKit env ID with its ROM status")
    p.add_argument("--system", default=None, help="atari2600, genesis, nes, snes, ... (case-insensitive)")
    p.add_argument("--available", action="store_true", help="only IDs whose ROM is present")
    p.set_defaults(func=run)


def all_entries() -> list[tuple[str, str, bool, str]]:
    """``[(env_id, system, rom_available, note), ...]`` for ALE and stable-retro IDs."""
    from retro_atari_kit.catalog import ale_games

    rows = [(g.env_id, "atari2600", True, "ALE, ROM ships with ale-py") for g in ale_games()]
    rows.extend(_retro_entries())
    return rows


def _retro_entries() -> list[tuple[str, str, bool, str]]:
    from retro_atari_kit.catalog.retro import retro_games
    from retro_atari_kit.roms import rom_status

    notes = {
        "installed": "stable-retro, ROM installed",
        "ale-py": "stable-retro, ROM from ale-py (installed on first use)",
        "missing": "stable-retro, ROM missing: retrokit import-roms DIR",
    }
    out = []
    for g in retro_games():
        status = rom_status(g)
        out.append((g.env_id, g.system.lower(), status != "missing", notes.get(status, status)))
    return out


def run(args: argparse.Namespace) -> int:
    rows = all_entries()
    if args.system:
        systems = sorted({r[1] for r in rows})
        rows = [r for r in rows if r[1] == args.system.lower()]
        if not rows:
            raise CliError(f"unknown system {args.system!r}; choose one of {', '.join(systems)}")
    if args.available:
        rows = [r for r in rows if r[2]]
    width = max((len(r[0]) for r in rows), default=10)
    for env_id, system, ok, note in rows:
        print(f"{env_id:<{width}}  {system:<10}  {'available' if ok else 'missing':<9}  {note}")
    n_ok = sum(r[2] for r in rows)
    print(f"{len(rows)} IDs, {n_ok} with ROM available")
    return 0
