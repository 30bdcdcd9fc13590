"""``retrokit list``: every RetroKit ID with its ROM status."""

from __future__ import annotations

import argparse

from retro_atari_kit.cli._common import CliError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "list",
        help="every RetroKit env ID with its ROM status",
        description="Every RetroKit env ID with its system and ROM status; NAME, --system and "
        "--available narrow the list.",
    )
    p.add_argument(
        "name",
        nargs="?",
        default=None,
        metavar="NAME",
        help="only IDs containing NAME, case-insensitive, e.g. sonic (default: every ID)",
    )
    p.add_argument(
        "--filter",
        dest="filter",
        default=None,
        metavar="NAME",
        help="the same as NAME (default: every ID)",
    )
    p.add_argument(
        "--system",
        default=None,
        help="atari2600, genesis, nes, snes, ... (case-insensitive; default: every system)",
    )
    p.add_argument("--available", action="store_true", help="only IDs whose ROM is present (default: off)")
    p.set_defaults(func=run)


def count_ids(n: int) -> str:
    """``"1 ID"`` / ``"N IDs"``."""
    return f"{n} ID" if n == 1 else f"{n} IDs"


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
    if args.name is not None and args.filter is not None and args.name != args.filter:
        raise CliError(f"give the name once: NAME {args.name!r} or --filter {args.filter!r}, not both")
    name = args.name if args.name is not None else args.filter
    rows = all_entries()
    if args.system:
        systems = sorted({r[1] for r in rows})
        if args.system.lower() not in systems:
            raise CliError(f"unknown system {args.system!r}; choose one of {', '.join(systems)}")
        rows = [r for r in rows if r[1] == args.system.lower()]
    if name is not None:
        from retro_atari_kit.catalog.suggest import contains, did_you_mean

        matching = [r for r in rows if contains(r[0], name)]
        if not matching:
            which = f"{args.system.lower()} ID" if args.system else "RetroKit ID"
            hint = did_you_mean(name, [r[0] for r in rows])
            raise CliError(f"no {which} contains {name!r}{hint or '; see `retrokit list`'}")
        rows = matching
    if args.available:
        rows = [r for r in rows if r[2]]
    width = max((len(r[0]) for r in rows), default=10)
    for env_id, system, ok, note in rows:
        print(f"{env_id:<{width}}  {system:<10}  {'available' if ok else 'missing':<9}  {note}")
    n_ok = sum(r[2] for r in rows)
    print(f"{count_ids(len(rows))}, {n_ok} with ROM available")
    return 0
