"""``retrokit export RUN_DIR OUT_DIR``: a small, publishable copy of a trained run (``results/<name>/``)."""

from __future__ import annotations

import argparse
import errno
import os
import re
import shutil

from retro_atari_kit.cli._common import CliError, engine, user_errors
from retro_atari_kit.files import check_creatable, os_error_message


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export",
        help="copy a run's record and a small final model for publishing",
        description="Copy config.yaml, progress.csv, log.txt and the monitor CSVs of RUN_DIR into the new "
        "directory OUT_DIR, with the final model's weights only (no optimizer state, no target network, no "
        "checkpoints): what `retrokit eval` needs to reproduce the run's scores.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.runs import check_export_target, copy_run_record, load_config
    from retro_atari_kit.runs.export import check_regular_inside

    with user_errors():
        backend = engine(load_config(args.run_dir)["engine"])
        for linked in (os.path.join(args.run_dir, name) for name in ("model.zip", "model", "checkpoints")):
            # before it is read as the model: a link out is the one line (one to nothing is no model, and
            # the newest one there is is exported)
            if os.path.islink(linked) and os.path.exists(linked):
                check_regular_inside(args.run_dir, linked)
        model, _ = backend.latest_model(args.run_dir)
        if os.path.isfile(model) or os.path.islink(model):  # RLlib's checkpoints are folders
            check_regular_inside(args.run_dir, model)  # a model.zip linked from elsewhere is not published
        check_export_target(args.out_dir)
        try:  # a name too long, /proc, a read-only disk: said before anything is copied
            check_creatable(args.out_dir)
        except OSError as exc:
            raise CliError(os_error_message(exc, "cannot create", flag="OUT_DIR")) from None
        # written next to OUT_DIR, renamed into place when complete: a failure leaves no half export
        staging = os.path.join(os.path.dirname(os.path.abspath(args.out_dir)), f".export-{os.getpid()}")
        try:
            copy_run_record(args.run_dir, staging)
            path, steps = backend.export_model(args.run_dir, staging)
            if os.path.isdir(args.out_dir):
                os.rmdir(args.out_dir)
            os.replace(staging, args.out_dir)
        except shutil.Error as exc:  # copytree's list of the files it could not copy: the first one
            raise CliError(_copy_error(exc, args.out_dir)) from None
        except OSError as exc:  # a full disk: nothing of the export is left
            if str(exc.filename or "").startswith(staging):  # our temporary folder: name the export instead
                exc.filename, exc.filename2 = args.out_dir, None
            raise CliError(os_error_message(exc, "cannot export to", flag="OUT_DIR")) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    size = os.path.getsize(os.path.join(args.out_dir, os.path.relpath(path, staging)))
    print(f"exported {args.run_dir} ({steps} steps) to {args.out_dir}: model {size / 2**20:.1f} MB")
    return 0


def _copy_error(exc: shutil.Error, out_dir: str) -> str:
    """One line for the first file ``shutil.copytree`` could not copy: a link to nothing in the run, or the
    export's disk refusing it."""
    src, _, why = exc.args[0][0] if exc.args and isinstance(exc.args[0], list) else ("", "", str(exc))
    if src and not os.path.exists(src):  # monitor/x.csv -> nowhere
        return os_error_message(OSError(errno.ENOENT, os.strerror(errno.ENOENT), src), "cannot copy")
    code = re.match(r"\[Errno (\d+)\] ([^:]+)", why)  # "[Errno 28] No space left on device: '...'"
    failed = OSError(int(code[1]), code[2], out_dir) if code else OSError(errno.EIO, why, out_dir)
    return os_error_message(failed, "cannot export to", flag="OUT_DIR")
