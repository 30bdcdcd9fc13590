"""``retrokit import-roms DIR``: add stable-retro ROMs found under DIR (SHA-1 matched, no root needed)."""

from __future__ import annotations

import argparse
import os

from retro_atari_kit.cli._common import CliError


def add_parser(sub) -> None:
    p = sub.add_parser("import-roms", help="import stable-retro ROMs from a folder (SHA-1 matched)")
    p.add_argument("path", metavar="DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not os.path.exists(args.path):
        raise CliError(f"{args.path}: no such file or folder; pass the folder that holds your ROM files")
    if not os.access(args.path, os.R_OK) or (os.path.isdir(args.path) and not os.access(args.path, os.X_OK)):
        raise CliError(f"{args.path}: permission denied; pass a folder (or file) you can read")
    try:
        from retro_atari_kit.roms import format_import_report, import_roms
    except ImportError as exc:
        raise CliError(f"ROM import is not available in this install ({exc})") from exc
    try:
        report = import_roms(args.path)
    except (ValueError, OSError) as exc:
        raise CliError(str(exc).splitlines()[0]) from exc
    print(format_import_report(report))
    return 0
