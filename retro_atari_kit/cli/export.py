"""``retrokit export RUN_DIR OUT_DIR``: a small, publishable copy of a trained run (``results/<name>/``)."""

from __future__ import annotations

import argparse
import os
import shutil

from retro_atari_kit.cli._common import user_errors
from retro_atari_kit.cli.engines import engine


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

    with user_errors():
        backend = engine(load_config(args.run_dir)["engine"])
        check_export_target(args.out_dir)
        # written next to OUT_DIR, renamed into place when complete: a failure leaves no half export
        staging = os.path.join(os.path.dirname(os.path.abspath(args.out_dir)), f".export-{os.getpid()}")
        try:
            copy_run_record(args.run_dir, staging)
            path, steps = backend.export_model(args.run_dir, staging)
            if os.path.isdir(args.out_dir):
                os.rmdir(args.out_dir)
            os.replace(staging, args.out_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    size = os.path.getsize(os.path.join(args.out_dir, os.path.relpath(path, staging)))
    print(f"exported {args.run_dir} ({steps} steps) to {args.out_dir}: model {size / 2**20:.1f} MB")
    return 0
