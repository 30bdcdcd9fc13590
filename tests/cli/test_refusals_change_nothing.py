"""A refused command changes nothing, and the files it reads are data: real ``retrokit`` processes on real
run dirs (a tiny DQN run with its replay buffer), damaged, killed or unreadable the ways users meet them.

- a refused ``--resume`` leaves every byte of the run as it was (no new ``--timesteps`` in config.yaml, no
  merged progress, no monitor folder of a segment that never ran): everything it will load is loaded first;
- a run killed before its first checkpoint resumes from its start, and no temporary outlives its writer;
- a ``--run-dir`` the OS refuses is said at once, and nothing is left of it;
- a config nested thousands of levels deep, replay-buffer counters of the wrong type or range, a truncated
  replay buffer, a plain-pickle ``policy.pth``: one line naming the file and what to do, no library warning;
- a file or folder the kit may not read is "Permission denied" and its path, never "damaged" or "no
  checkpoint" (root ignores file modes: the commands run with CAP_DAC_OVERRIDE dropped, as in
  test_os_errors.py).
"""

from __future__ import annotations

import errno
import io
import json
import os
import pickle
import shutil
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from retro_atari_kit.files import atomic_write_text, leftover_temporaries
from retro_atari_kit.runs.layout import make_dirs
from tests.cli._run import ENV, RETROKIT, changed, child_env, one_error_line, retrokit, snapshot

pytestmark = pytest.mark.slow

TINY = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]
DQN_TINY = ["--n-envs", "1", "--set", "buffer_size=200", "--set", "learning_starts=16"]
REPLAY = "checkpoints/replay_buffer.npz"
NEWEST = "checkpoints/model_64_steps.zip"


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory) -> Path:
    """A finished 64-step DQN run with checkpoints at 32 and 64 steps and its replay buffer."""
    run = tmp_path_factory.mktemp("dqn") / "run"
    res = retrokit(
        "train", "dqn", ENV, "--timesteps", "64", "--run-dir", str(run), *DQN_TINY,
        "--checkpoint-every", "32", "--save-replay-buffer", cwd=run.parent,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return run


@pytest.fixture
def run(dqn_run, tmp_path) -> Path:
    shutil.copytree(dqn_run, tmp_path / "run", symlinks=True)
    return tmp_path / "run"


def _rewrite_counters(path: Path, **counters) -> None:
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    scalars = json.loads(arrays["_scalars"].tobytes())
    scalars.update(counters)
    arrays["_scalars"] = np.frombuffer(json.dumps(scalars).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _replace_member(path: Path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(path) as zf:
        items = {name: zf.read(name) for name in zf.namelist()}
    items[member] = data
    with zipfile.ZipFile(path, "w") as zf:
        for name, body in items.items():
            zf.writestr(name, body)


def _flip_a_byte_inside(path: Path, member: str) -> None:
    """A disk error inside a member: the zip's directory is whole, the member's CRC-32 is not."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    with open(path, "r+b") as fh:  # past the local header (30 bytes + name + extra), into the data
        fh.seek(info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))


DAMAGE = {
    "replay truncated": (lambda r: os.truncate(r / REPLAY, 100_000), ("replay_buffer.npz", "delete it")),
    "replay pos a string": (lambda r: _rewrite_counters(r / REPLAY, pos="3"), ("'pos' is str", "delete it")),
    "replay pos past the buffer": (lambda r: _rewrite_counters(r / REPLAY, pos=10**6), ("'pos' is 1000000",)),
    "replay free slot a float": (
        lambda r: _rewrite_counters(r / REPLAY, _free_terminal=[1.5]),
        ("'_free_terminal'", "replay_buffer.npz"),
    ),
    "replay a byte flipped": (lambda r: _flip_a_byte_inside(r / REPLAY, "frames.npy"), ("CRC",)),
    "policy.pth plain pickle": (
        lambda r: _replace_member(r / NEWEST, "policy.pth", pickle.dumps({"a": 1}, protocol=4)),
        ("model_64_steps.zip member 'policy.pth' is not plain weights", "Unsupported operand"),
    ),
    "policy.pth not torch's": (
        lambda r: _replace_member(r / NEWEST, "policy.pth", b"not torch weights\n" * 64),
        ("model_64_steps.zip member 'policy.pth'",),
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_refused_resume_leaves_every_byte_of_the_run(damage, run, tmp_path):
    hurt, needles = DAMAGE[damage]
    hurt(run)
    before = snapshot(run)
    res = retrokit("train", "--resume", "run", "--timesteps", "128", cwd=tmp_path)
    one_error_line(res, *needles)  # one line: no torch warning, no traceback, before "resuming from"
    assert "Warning" not in res.stderr and "resuming from" not in res.stdout
    assert changed(before, snapshot(run)) == []  # not even --timesteps 128 went into config.yaml


def test_a_run_killed_before_its_first_checkpoint_resumes_from_its_start(tmp_path):
    argv = ["train", "ppo", ENV, "--timesteps", "1e6", "--run-dir", "run", *TINY]
    proc = subprocess.Popen(
        [RETROKIT, *argv], cwd=tmp_path, env=child_env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    run = tmp_path / "run"
    try:
        deadline = time.monotonic() + 300
        while not (run / "monitor").is_dir():  # its envs are made: it trains, no checkpoint yet
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # as the OOM killer does: nothing runs after it
        proc.wait()
    # ... killed while it wrote its first checkpoint: the temporary of the atomic write, empty
    (run / "checkpoints").mkdir(exist_ok=True)
    cut = run / "checkpoints" / f".model_32_steps.tmp-{proc.pid}.zip"
    cut.write_bytes(b"")
    again = retrokit(*argv, cwd=tmp_path)
    one_error_line(again, "run dir run exists; use --resume run")
    res = retrokit("train", "--resume", "run", "--timesteps", "64", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"removed run/checkpoints/{cut.name}" in res.stdout
    assert "no checkpoint yet: starting run again from step 0" in res.stdout
    assert (run / "checkpoints" / "model_64_steps.zip").is_file() and (run / "model.zip").is_file()
    # the killed start's logs are kept, apart from the live ones the new start wrote
    assert not (run / "orphaned-1" / "config.yaml").exists()
    assert (run / "orphaned-1" / "monitor").is_dir() and (run / "monitor" / "0.monitor.csv").is_file()
    assert not [p for p in run.rglob(".*tmp*")] and not (run / ".train.pid").exists()


def test_a_run_with_a_final_model_but_no_checkpoints_is_not_started_over(dqn_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(dqn_run, run)
    shutil.rmtree(run / "checkpoints")
    before = snapshot(run)
    res = retrokit("train", "--resume", "run", cwd=tmp_path)
    one_error_line(res, "final model run/model.zip", "restore checkpoints/")
    assert changed(before, snapshot(run)) == []


@pytest.mark.parametrize("levels", [21, 1])  # the whole path past PATH_MAX; one name past NAME_MAX
def test_a_run_dir_the_os_refuses_is_said_at_once_and_leaves_no_folder(levels, tmp_path):
    run_dir = "/".join(["p" * 200] * levels) if levels > 1 else f"runs/{'a' * 300}/x"
    started = time.monotonic()
    res = retrokit("train", "ppo", ENV, "--run-dir", run_dir, "--timesteps", "64", *TINY, cwd=tmp_path)
    line = one_error_line(res, "cannot create run dir", "File name too long", "--run-dir")
    assert ("path is longer than the OS takes" in line) == (levels > 1), line
    assert res.stdout == ""  # no config, no memory estimate: refused before the engine was loaded
    assert time.monotonic() - started < 60  # the engine's import and an env start took 12 s here
    assert os.listdir(tmp_path) == []


def test_make_dirs_removes_what_it_made_when_the_os_refuses_a_deeper_folder(tmp_path):
    deep = tmp_path.joinpath(*["d" * 250] * 20)  # past PATH_MAX part way down
    with pytest.raises(OSError) as err:
        make_dirs(str(deep))
    assert (
        err.value.errno == errno.ENAMETOOLONG and os.listdir(tmp_path) == []
    )  # ENAMETOOLONG, not 16 empty folders


@pytest.mark.parametrize("cmd", [("train", "--resume", "run"), ("eval", "run", "--episodes", "1")])
def test_a_config_nested_thousands_deep_is_one_line(cmd, run, tmp_path):
    with open(run / "config.yaml", "a") as fh:
        fh.write("deep: " + "[" * 50_000 + "]" * 50_000 + "\n")
    before = snapshot(run)
    one_error_line(retrokit(*cmd, cwd=tmp_path), "run/config.yaml: nested too deeply", "restore it")
    assert changed(before, snapshot(run)) == []


def test_eval_of_a_plain_pickle_policy_is_one_line_without_torch_warning(run, tmp_path):
    _replace_member(run / "model.zip", "policy.pth", pickle.dumps({"a": 1}, protocol=4))
    res = retrokit("eval", "run", "--episodes", "1", cwd=tmp_path)
    one_error_line(res, "run/model.zip member 'policy.pth' is not plain weights")


# --- what the kit may not read: "Permission denied" and the path -----------------------------------------

UNREADABLE = {
    "model.zip": (("eval", "run", "--episodes", "1"), "cannot read run/model.zip"),
    "model.zip ": (("export", "run", "out"), "cannot read run/model.zip"),
    "model.zip  ": (("eval", "run/model.zip", "--episodes", "1"), "cannot read run/model.zip"),
    "checkpoints": (("train", "--resume", "run", "--timesteps", "128"), "run/checkpoints"),
    NEWEST: (("train", "--resume", "run", "--timesteps", "128"), f"cannot read run/{NEWEST}"),
    REPLAY: (("train", "--resume", "run", "--timesteps", "128"), f"replay buffer run/{REPLAY}"),
    "config.yaml": (("train", "--resume", "run", "--timesteps", "128"), "cannot read run/config.yaml"),
}


@pytest.mark.parametrize("name", list(UNREADABLE))
def test_a_file_the_kit_may_not_read_is_permission_denied_and_its_path(name, run, tmp_path):
    cmd, needle = UNREADABLE[name]
    target = run / name.strip()
    target.chmod(0)
    before = snapshot(run)
    try:
        res = retrokit(*cmd, cwd=tmp_path, modes_bind=True)
    finally:
        target.chmod(0o755 if target.is_dir() else 0o644)
    line = one_error_line(res, "Permission denied", needle)
    assert "not an SB3" not in line and "no checkpoint" not in line and "start a new run" not in line
    assert changed(before, snapshot(run)) == []
    assert sorted(os.listdir(tmp_path)) == ["run"]


# --- temporaries of atomic writes -------------------------------------------------------------------------


def test_an_atomic_write_removes_what_a_killed_writer_of_that_file_left(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no process has now
    target = tmp_path / "notes.txt"
    stale = tmp_path / f".notes.tmp-{dead.pid}.txt"  # its write was cut short by SIGKILL
    stale.write_bytes(b"")
    live = tmp_path / f".notes.tmp-{os.getppid()}.txt"  # a live writer's: not ours to remove
    live.write_bytes(b"")
    other = tmp_path / f".other.tmp-{dead.pid}.txt"  # another file's: its own writer's business
    other.write_bytes(b"")
    atomic_write_text(str(target), "new\n")
    assert target.read_text() == "new\n" and not stale.exists() and live.exists() and other.exists()
    live.unlink()
    other.unlink()
    assert leftover_temporaries(str(tmp_path)) == []


def test_a_replaced_folder_left_aside_by_a_killed_writer_is_put_back(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    target = tmp_path / "model"
    aside = tmp_path / f".model.tmp-{dead.pid}.old"  # killed between moving the old one aside and the new in
    aside.mkdir()
    (aside / "weights").write_bytes(b"saved")

    def write(tmp: str) -> None:
        assert (target / "weights").read_bytes() == b"saved"  # back before the new write began
        os.mkdir(tmp)
        (Path(tmp) / "weights").write_bytes(b"new")

    from retro_atari_kit.files import atomic_write

    atomic_write(str(target), write)
    assert (target / "weights").read_bytes() == b"new" and not aside.exists()
    assert leftover_temporaries(str(tmp_path)) == []


def test_pickled_replay_counters_are_refused_never_unpickled(run, tmp_path):
    """The replay buffer's counters member is read as an array with allow_pickle=False: a pickled object
    array there is one line, and nothing of it runs."""
    counters = io.BytesIO()
    np.save(counters, np.array([{"pos": 3}], dtype=object), allow_pickle=True)
    _replace_member(run / REPLAY, "_scalars.npy", counters.getvalue())
    before = snapshot(run)
    res = retrokit("train", "--resume", "run", "--timesteps", "128", cwd=tmp_path)
    one_error_line(res, "replay buffer run/checkpoints/replay_buffer.npz", "delete it")
    assert changed(before, snapshot(run)) == []
