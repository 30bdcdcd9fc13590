"""The ``retrokit`` command: train, eval, record, plot, export, list, import-roms, bench.

``main(argv=None) -> int`` is the console-script target. User errors (bad arguments, unknown IDs, an
existing run dir, an unreadable checkpoint, a missing ROM) print one line naming the fix and return 2.
SB3 is imported lazily inside the commands that need it; this module never imports it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from collections.abc import Sequence

from retro_atari_kit.cli._common import CliError
from retro_atari_kit.envs._quiet import quiet_ale_banner

__all__ = ["CliError", "build_parser", "main"]

# commands that build no env (and so need not load ale-py)
NO_ENV_COMMANDS = ("list", "plot", "import-roms")


class _Parser(argparse.ArgumentParser):
    """argparse that raises CliError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise CliError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    from retro_atari_kit.cli import bench, evaluate, export, listing, plot, record, roms, train

    parser = _Parser(
        prog="retrokit",
        description="Train, evaluate, record and plot RL agents on Atari and retro games (retro-atari-kit).",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in (train, evaluate, record, plot, export, listing, roms, bench):
        mod.add_parser(sub)
    return parser


def _version() -> str:
    from retro_atari_kit import __version__

    return f"retrokit {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``retrokit`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
        args.command_line = shlex.join(["retrokit", *argv])
        if not getattr(args, "command", None):
            parser.print_help()
            raise CliError("missing COMMAND, e.g. retrokit train ppo RetroKit/Pong-v0 (see above)")
        if args.command not in NO_ENV_COMMANDS:
            quiet_ale_banner()
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"retrokit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("retrokit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`retrokit list | head`): stop quietly
        # Python would report the unflushed output at exit too: point stdout at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
