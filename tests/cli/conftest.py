"""Fixtures of the ``retrokit train`` fault tests: one tiny finished run per module, a fresh copy of it per
test, and a byte-level snapshot of a run dir (a refused command must leave it equal)."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable

import pytest

from retro_atari_kit.cli import main


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> str:
    """A finished 64-step PPO run on Pong with checkpoints at 32 and 64 steps."""
    run = str(tmp_path_factory.mktemp("tiny") / "pong")
    tiny = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "32"]
    assert main(["train", "ppo", "RetroKit/Pong-v0", "--timesteps", "64", "--run-dir", run, *tiny]) == 0
    return run


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> str:
    """A fresh copy of ``tiny_run`` for one test to damage or edit."""
    target = str(tmp_path / "run")
    shutil.copytree(tiny_run, target)
    return target


def _snapshot(run: str) -> dict[str, bytes]:
    files = {}
    for path in glob.glob(os.path.join(run, "**"), recursive=True) + glob.glob(os.path.join(run, ".*")):
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                files[os.path.relpath(path, run)] = fh.read()
    return files


@pytest.fixture
def snapshot() -> Callable[[str], dict[str, bytes]]:
    """``snapshot(run)``: every file of ``run`` (dotfiles included) and its bytes."""
    return _snapshot
