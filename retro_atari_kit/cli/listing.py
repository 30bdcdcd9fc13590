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
    try:
        from retro_atari_kit.catalog import retro as rc
    except ImportError:
        return []
    lister = getattr(rc, "retro_games", None) or getattr(rc, "list_retro_games", None)
    if lister is None:
        return []
    out = []
    for g in lister():
        env_id = getattr(g, "env_id", None) or str(g)
        system = str(getattr(g, "system", env_id.rsplit("-", 2)[-2] if "-" in env_id else "?"))
        status = _rom_status(rc, g)
        note = "stable-retro" if status else "stable-retro, ROM missing: retrokit import-roms DIR"
        out.append((env_id, system.lower(), status, note))
    return out


def _rom_status(rc, game) -> bool:
    for attr in ("rom_available", "has_rom", "available"):
        v = getattr(game, attr, None)
        if v is not None:
            return bool(v() if callable(v) else v)
    fn = getattr(rc, "rom_available", None) or getattr(rc, "has_rom", None)
    if fn is not None:
        return bool(fn(game))
    return False


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
