"""Running the installed ``retrokit`` as a user does, and what a user must see: shared by the CLI tests
(``tests/cli/``) and the sweep of bad inputs (``tests/sweep/``).

A command runs as a real subprocess of the console script beside this Python, in a folder of the test's own.
A mistake gives exit 2 and exactly one stderr line starting ``retrokit: error:`` (no traceback, no banner); a
warning exit 0 and one ``retrokit: warning:`` line; and a refused command leaves every file as it was.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

RETROKIT = os.path.join(os.path.dirname(sys.executable), "retrokit")
ENV = "RetroKit/Pong-v0"
# one OpenMP thread per command: the tests' processes share the cores (see tests/conftest.py)
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": ""}  # Python's UTF-8 mode follows (PEP 540)
# the smallest RLlib run that trains: one env runner with two envs, 32-step batches (add --checkpoint-every)
RLLIB_TINY = [
    "--engine", "rllib", "--num-env-runners", "1", "--envs-per-runner", "2",
    "--set", "train_batch_size_per_learner=32", "--set", "rollout_fragment_length=16",
    "--set", "min_time_s_per_iteration=1",
]  # fmt: skip
# an RLlib run's progress line: a true score as a number, or that no game has ended yet (never "None")
RLLIB_PROGRESS = re.compile(
    r"^\d+ steps, \d+ steps/s, \d+ games, (no game finished yet|true score -?\d+\.\d\d)$"
)


def file_modes_bind() -> None:
    """In the child before exec: drop root's power to ignore file modes (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH, from the bounding set: gone after exec), so a 0o555 folder is read-only for it."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def child_env(env: dict[str, str | None] | None = None) -> dict[str, str]:
    """The commands' environment with ``env`` added (a value of None removes that variable)."""
    merged = {**CHILD_ENV, **(env or {})}
    return {key: value for key, value in merged.items() if value is not None}


def retrokit(
    *args: str,
    cwd,
    env: dict[str, str | None] | None = None,
    stdout=subprocess.PIPE,
    modes_bind: bool = False,
    preexec: Callable[[], None] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """The console script in a subprocess; ``modes_bind``: file modes bind it even when run as root;
    ``preexec``: run in the child before exec (a resource limit)."""
    steps = [
        step for step in (file_modes_bind if modes_bind and os.geteuid() == 0 else None, preexec) if step
    ]
    return subprocess.run(
        [RETROKIT, *args],
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        timeout=timeout,
        env=child_env(env),
        preexec_fn=(lambda: [step() for step in steps]) if steps else None,
    )


def one_error_line(res: subprocess.CompletedProcess, *needles: str, last: bool = False) -> str:
    """The one ``retrokit: error:`` line of ``res`` (exit 2, no traceback), with every needle; ``last``: the
    command got as far as training, so its progress bar is on stderr above the line."""
    assert res.returncode == 2, (res.returncode, res.stderr[-3000:])
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines and (last or len(lines) == 1), res.stderr[-3000:]
    assert lines[-1].startswith("retrokit: error: "), lines[-1]
    for needle in needles:
        assert needle in lines[-1], lines[-1]
    return lines[-1]


def snapshot(root) -> dict[str, tuple]:
    """Every entry under ``root`` (dotfiles included): folders and links by kind, files by size,
    modification time and SHA-1. Equal snapshots: nothing was written, removed or touched."""
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root)] = ("link",) if os.path.islink(full) else ("dir",)
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            digest = ""
            if os.path.isfile(full) and not os.path.islink(full) and os.access(full, os.R_OK):
                with open(full, "rb") as fh:
                    digest = hashlib.sha1(fh.read()).hexdigest()
            out[os.path.relpath(full, root)] = (st.st_size, st.st_mtime_ns, digest)
    return out


def changed(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """The entries two snapshots disagree on (made, removed or changed)."""
    return sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))


@contextlib.contextmanager
def mounted(*argv: str) -> Iterator[None]:
    """``mount ARGV`` (its last argument the mount point) for the block; a skip where this machine cannot."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs or a read-only bind needs root and mount(8)")
    res = subprocess.run(["mount", *argv], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"this machine cannot mount ({res.stderr.strip()})")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", argv[-1]], capture_output=True)


def fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to its last byte (the file ``.filler``)."""
    with open(Path(folder) / ".filler", "wb", buffering=0) as fh:
        for chunk in (1 << 20, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * chunk)


def edit_record(path: str, changes: dict[str, object]) -> None:
    """Damage an eval record as a disk or another hand might: each ``key`` (``protocol.<name>`` reaches into
    the protocol mapping) set to its value, or removed where the value is ``...``."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for key, value in changes.items():
        inner = key.startswith("protocol.")
        target, name = (data["protocol"], key.split(".", 1)[1]) if inner else (data, key)
        if value is ...:
            del target[name]
        else:
            target[name] = value
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
