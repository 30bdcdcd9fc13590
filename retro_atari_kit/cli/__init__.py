"""The ``retrokit`` command: train, eval, record, plot, export, list, import-roms, bench.

``main(argv=None) -> int`` is the console-script target. User errors (bad arguments, unknown IDs, an
existing run dir, an unreadable checkpoint, a missing ROM) print one line naming the fix and return 2; so do
the operating system's refusals (a name too long, a read-only or full disk, a folder where a file is
expected, a broken link, output that cannot be written: ``retro_atari_kit.files.os_error_message``).
SB3 is imported lazily inside the commands that need it; this module never imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shlex
import signal
import sys
from collections.abc import Sequence

from retro_atari_kit.cli._common import CliError
from retro_atari_kit.envs._quiet import quiet_ale_banner
from retro_atari_kit.files import os_error_message

__all__ = ["CliError", "build_parser", "main"]

# commands that build no env (and so need not load ale-py)
NO_ENV_COMMANDS = ("list", "plot", "report", "import-roms")


class _Parser(argparse.ArgumentParser):
    """argparse that raises CliError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise CliError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    from retro_atari_kit.cli import bench, evaluate, export, listing, plot, record, report, roms, train

    parser = _Parser(
        prog="retrokit",
        description="Train, evaluate, record and plot RL agents on Atari and retro games (retro-atari-kit).",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in (train, evaluate, record, plot, report, export, listing, roms, bench):
        mod.add_parser(sub)
    return parser


def _version() -> str:
    from retro_atari_kit import __version__

    return f"retrokit {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``retrokit`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    args = None
    saved_stdout = sys.stdout
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        _check_text(argv)
        args = parser.parse_args(argv)
        _check_working_directory()
        args.command_line = shlex.join(["retrokit", *argv])
        if not getattr(args, "command", None):
            parser.print_help()
            raise CliError("missing COMMAND, e.g. retrokit train ppo RetroKit/Pong-v0 (see above)")
        if args.command not in NO_ENV_COMMANDS:
            quiet_ale_banner()
        if sys.stdout is not None:
            sys.stdout = _Stdout(sys.stdout)
        code = int(args.func(args) or 0)
        if sys.stdout is not None:  # a full disk behind stdout is this command's failure, not a note at exit
            sys.stdout.flush()
        return code
    except CliError as exc:
        _report(f"retrokit: error: {exc}")
        return 2
    except KeyboardInterrupt:
        _report("retrokit: interrupted")
        return 130
    except MemoryError as exc:  # numpy's _ArrayMemoryError too: one line naming the limit, not 30
        from retro_atari_kit.limits import memory_error_line

        _report(f"retrokit: error: {memory_error_line(exc)}")
        return 2
    except BrokenPipeError as exc:
        if exc.filename not in (None, STDOUT):
            _report(f"retrokit: error: {_os_error_line(exc, args)}")
            return 2
        # the reader of stdout went away (`retrokit list | head`): stop quietly; Python would report the
        # unflushed output at exit too: point stdout at /dev/null first
        _stdout_to_devnull(saved_stdout)
        return 128 + signal.SIGPIPE
    except OSError as exc:  # the operating system said no: one line, as for any user error
        if exc.filename == STDOUT:  # what is still buffered for it would fail again at exit
            _stdout_to_devnull(saved_stdout)
        _report(f"retrokit: error: {_os_error_line(exc, args)}")
        return 2
    finally:
        sys.stdout = saved_stdout


def _check_working_directory() -> None:
    """CliError when the working directory was deleted: torch, matplotlib and others then fail with their
    own riddles (oneMKL's "Cannot load libtorch_cpu.so" ends the process) instead of naming the cause."""
    try:
        os.getcwd()
    except FileNotFoundError:
        shell = os.environ.get("PWD", "")  # the shell's idea of it, if it names the deleted folder
        where = f" ({shell})" if shell and not os.path.isdir(shell) else ""
        raise CliError(
            f"the current directory{where} was deleted; cd to a directory that exists and run the command "
            "again"
        ) from None


def _report(line: str) -> None:
    """``line`` on stderr, if stderr can take it (closed, or a full disk: the exit code still says it), on a
    line of its own: a progress bar the failed command left open is closed first."""
    if sys.stderr is None:  # closed at start (`2>&-`): print(file=None) would write to stdout
        return
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        with contextlib.suppress(Exception):  # its last state, then a new line
            bar.close()
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _stdout_to_devnull(stream) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


STDOUT = "<stdout>"  # the file name of an OSError of writing the command's output


class _Stdout:
    """``sys.stdout`` while a command runs: an OSError of writing it (a full disk behind ``> file``, EPIPE)
    names :data:`STDOUT`, so ``main`` can tell it from the errors of the command's own files."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            exc.filename = STDOUT if exc.errno is not None else exc.filename
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            exc.filename = STDOUT if exc.errno is not None else exc.filename
            raise

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _os_error_line(exc: OSError, args: argparse.Namespace | None) -> str:
    """The one line for an OSError that reached ``main``: where, why, what to do; for the files of a run
    being trained, how to go on from its last checkpoint."""
    if exc.filename == STDOUT:
        return os_error_message(
            OSError(exc.errno, exc.strerror),
            "cannot write the output (stdout)",
            "free some space where it goes, or send it elsewhere",
        )
    path = os.fsdecode(exc.filename) if isinstance(exc.filename, (str, bytes)) else None
    run_dir = _run_dir_around(path) if path else None
    if run_dir is None or getattr(args, "command", None) != "train":
        return os_error_message(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
        return os_error_message(
            exc,
            "cannot write",
            f"{run_dir} keeps its last checkpoint: free some space, then retrokit train --resume {run_dir}",
        )
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return os_error_message(
            exc,
            "cannot write",
            f"training writes in {run_dir}: make it writable, or copy it to a writable "
            "disk and resume the copy",
        )
    return os_error_message(exc)


def _run_dir_around(path: str) -> str | None:
    """The run dir holding ``path`` (its folder or one of the two above it has a config.yaml), or None."""
    from retro_atari_kit.runs.layout import CONFIG_FILE

    folder = os.path.dirname(path)
    for _ in range(3):
        if os.path.isfile(os.path.join(folder or ".", CONFIG_FILE)):
            return folder or "."
        folder = os.path.dirname(folder)
    return None


def _check_text(argv: list[str]) -> None:
    """CliError for an argument that is not text: bytes the locale cannot decode (a non-ASCII path or title
    under an ASCII locale, a name in another encoding), which libraries (tensorboard, matplotlib, YAML) cannot
    write back."""
    encoding = sys.getfilesystemencoding()
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(arg).decode("utf-8", "replace")
            if encoding.replace("-", "").lower() != "utf8":
                raise CliError(
                    f"{shown!r}: the locale's encoding ({encoding}) has no non-ASCII characters; run with a "
                    "UTF-8 locale (LC_ALL=C.UTF-8) or PYTHONUTF8=1"
                ) from None
            raise CliError(
                f"{shown!r} is not UTF-8 text (a name in another encoding?); rename it to a UTF-8 name"
            ) from None
