"""When the operating system says no: a name too long, a path under /proc, a read-only run dir or
disk, a full disk, a folder where a file is expected, a link to nothing in the run dir, an ASCII locale.

Every command that reads or writes paths gives exactly one ``retrokit: error:`` line and exit 2, said before
work that would be lost (a game played, a run read), and nothing saved before is lost or rewritten. Real
processes of the installed ``retrokit``, real file systems: a tmpfs of a few kB is a full disk, a read-only
bind mount a read-only one, file modes bind root too once it drops CAP_DAC_OVERRIDE. Mounting needs root;
without it those tests are skipped, saying so. ``python -m pytest -m sweep tests/sweep/test_sweep_os.py``
runs the wider sweep these tests were taken from.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from retro_atari_kit.cli import main
from retro_atari_kit.files import leftover_temporaries
from retro_atari_kit.runs import atomic_write, atomic_write_text
from tests.cli._run import ASCII, ENV, fill, mounted, one_error_line, retrokit

pytestmark = pytest.mark.slow

TINY = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]
LONG = "a" * 300  # longer than any Linux file system's 255-byte names


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file's bytes (folders and links by kind) under ``root``."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "link" if path.is_symlink() else "dir" if path.is_dir() else path.read_bytes()
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A finished 64-step PPO run with checkpoints at 32 and 64 steps."""
    run = tmp_path_factory.mktemp("os-errors") / "run"
    argv = [
        "train",
        "ppo",
        ENV,
        "--timesteps",
        "64",
        "--run-dir",
        str(run),
        *TINY,
        "--checkpoint-every",
        "32",
    ]
    assert main(argv) == 0
    return run


@pytest.fixture
def run(tiny_run, tmp_path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(tiny_run, target, symlinks=True)
    return target


# --- a name too long, a path under /proc: refused before anything is built, played or copied ---------------


@pytest.mark.parametrize("run_dir", [f"runs/{LONG}/x", "/proc/x"])
def test_a_run_dir_the_os_refuses_is_one_line_and_nothing_is_made(run_dir, tmp_path):
    res = retrokit("train", "ppo", ENV, "--run-dir", run_dir, "--timesteps", "64", *TINY, cwd=tmp_path)
    line = one_error_line(res, "cannot create run dir")
    assert ("File name too long" in line and "--run-dir" in line) if "runs/" in run_dir else "/proc" in line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("out", [f"{LONG}.mp4", "/proc/x.gif"])
def test_record_refuses_an_out_the_os_refuses_before_a_game_is_played(out, run, tmp_path):
    res = retrokit("record", "run", "--out", out, cwd=tmp_path)
    one_error_line(res, "--out")
    assert "game" not in res.stdout and sorted(os.listdir(tmp_path)) == ["run"]


def test_plot_refuses_a_name_too_long_and_takes_a_long_one_that_fits(run, tmp_path):
    one_error_line(retrokit("plot", "run", "--out", f"{LONG}.png", cwd=tmp_path), "File name too long")
    fits = f"{'b' * 246}.png"  # 250 bytes: fits; its temporary's name is shortened to fit too
    res = retrokit("plot", "run", "--out", fits, cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / fits).stat().st_size > 0, res.stderr[-2000:]
    assert leftover_temporaries(str(tmp_path)) == []


def test_export_to_a_name_too_long_leaves_no_half_export(run, tmp_path):
    one_error_line(retrokit("export", "run", LONG, cwd=tmp_path), "File name too long", "OUT_DIR")
    assert sorted(os.listdir(tmp_path)) == ["run"]  # no .export-<pid> staging folder


# --- a read-only run dir or disk ----------------------------------------------------------------------------


def test_resume_of_a_run_on_a_read_only_mount_is_one_line_and_changes_nothing(run, tmp_path):
    before = snapshot(run)
    with mounted("--bind", str(run), str(run)), mounted("-o", "remount,bind,ro", str(run)):
        res = retrokit("train", "--resume", "run", "--timesteps", "128", cwd=tmp_path)
        eval_res = retrokit("eval", "run", "--episodes", "1", cwd=tmp_path)  # reading needs no writes
    one_error_line(res, "Read-only file system", "writable")
    assert eval_res.returncode == 0, eval_res.stderr[-2000:]
    assert snapshot(run) == before


def test_resume_of_a_run_without_write_permission_is_one_line_and_changes_nothing(run, tmp_path):
    for path in [run, *run.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    before = snapshot(run)
    try:
        res = retrokit("train", "--resume", "run", "--timesteps", "128", cwd=tmp_path, modes_bind=True)
    finally:
        for path in [run, *run.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    one_error_line(res, "Permission denied", "writable")
    assert snapshot(run) == before


# --- a full disk --------------------------------------------------------------------------------------------


def test_a_full_disk_while_training_keeps_the_checkpoints_and_says_how_to_go_on(tiny_run, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    used = sum(4096 + f.stat().st_size for f in tiny_run.rglob("*") if f.is_file())
    with mounted("-t", "tmpfs", "-o", f"size={used // 1024 + 8 * 1024}k", "tmpfs", str(disk)):
        shutil.copytree(tiny_run, disk / "run")  # 8 MB spare: the next checkpoint (20 MB) does not fit
        res = retrokit("train", "--resume", "disk/run", "--timesteps", "128", cwd=tmp_path)
        saved = {
            name: (disk / "run" / name).read_bytes()
            for name in ("model.zip", "checkpoints/model_64_steps.zip")
        }
        leftovers = leftover_temporaries(str(disk / "run" / "checkpoints")) + leftover_temporaries(
            str(disk / "run")
        )
    one_error_line(res, "No space left on device", "retrokit train --resume disk/run", last=True)
    for name, data in saved.items():
        assert data == (tiny_run / name).read_bytes(), name
    assert leftovers == []


@pytest.mark.parametrize("cmd", [["plot", "run"], ["record", "run", "--max-steps", "40"]])
def test_a_full_disk_leaves_the_older_file_of_that_name_as_it_was(cmd, run, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    name = "old.png" if cmd[0] == "plot" else "old.gif"
    with mounted("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)):
        (disk / name).write_text("an older one\n")
        fill(disk)
        res = retrokit(*cmd, "--out", f"disk/{name}", cwd=tmp_path)
        left = sorted(os.listdir(disk))
        old = (disk / name).read_text()
    one_error_line(res, "No space left on device", f"disk/{name}")
    assert old == "an older one\n" and left == sorted([".filler", name])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this machine")
def test_output_to_a_full_disk_is_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        res = retrokit("list", cwd=tmp_path, stdout=full)
    one_error_line(res, "cannot write the output (stdout)", "No space left on device")


# --- a folder where a file is expected, a link to nothing ---------------------------------------------------


def test_config_yaml_that_is_a_folder_is_named(run, tmp_path):
    (run / "config.yaml").unlink()
    (run / "config.yaml").mkdir()
    one_error_line(retrokit("eval", "run", cwd=tmp_path), "run/config.yaml is a folder")


@pytest.mark.parametrize(
    "name, kind, needles",
    [
        ("log.txt", "folder", ("run/log.txt is a folder where a file is expected",)),
        ("checkpoints", "file", ("run/checkpoints is a file where a folder is expected",)),
        ("checkpoints", "link", ("run/checkpoints is a link to", "does not exist")),
    ],
)
def test_resume_refuses_a_run_dir_entry_of_the_wrong_kind_before_writing(name, kind, needles, run, tmp_path):
    path = run / name
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "file":
        path.write_text("not a folder\n")
    else:
        path.symlink_to(tmp_path / "nowhere")
    before = snapshot(run)
    one_error_line(retrokit("train", "--resume", "run", "--timesteps", "128", cwd=tmp_path), *needles)
    assert snapshot(run) == before


def test_export_names_a_monitor_log_that_links_to_nothing_and_leaves_no_half_export(run, tmp_path):
    (run / "monitor" / "9.monitor.csv").symlink_to(tmp_path / "nowhere")
    res = retrokit("export", "run", "out", cwd=tmp_path)
    one_error_line(res, "run/monitor/9.monitor.csv", "does not exist", "remove the link")
    assert sorted(os.listdir(tmp_path)) == ["run"]


# --- the locale ---------------------------------------------------------------------------------------------


def test_glyphs_the_font_lacks_are_one_warning_under_an_ascii_locale(run, tmp_path):
    res = retrokit("plot", "run", "--title", "Pöng 乒乓", "--out", "pöng.png", cwd=tmp_path, env=ASCII)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 0 and len(lines) == 1, res.stderr[-2000:]
    assert lines[0].startswith("retrokit: warning: ") and "乒乓" in lines[0]
    assert (tmp_path / "pöng.png").stat().st_size > 0


@pytest.mark.parametrize("env, arg", [({**ASCII, "PYTHONUTF8": "0"}, "pöng-ü"), ({}, "r\udcf6n")])
def test_a_name_the_locale_cannot_hold_is_one_line(env, arg, run, tmp_path):
    """No UTF-8 mode under an ASCII locale, or a name in Latin-1 bytes: tensorboard, matplotlib and YAML
    cannot write it back, so it is refused before anything is read or written."""
    shutil.copytree(run, tmp_path / arg)
    before = snapshot(tmp_path)
    for argv in (["train", "--resume", arg, "--timesteps", "96"], ["plot", arg]):
        one_error_line(retrokit(*argv, cwd=tmp_path, env=env), "UTF-8")
    assert snapshot(tmp_path) == before


# --- atomic writes name the destination ---------------------------------------------------------------------


def test_atomic_writes_on_a_full_disk_name_the_destination_and_leave_nothing(tmp_path):
    import torch

    disk = tmp_path / "disk"
    disk.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)):
        atomic_write_text(str(disk / "old.txt"), "old\n")
        errors = []
        for name, write in [
            ("a.bin", lambda tmp: Path(tmp).write_bytes(b"\0" * (1 << 20))),
            ("b.pt", lambda tmp: torch.save(torch.zeros(1 << 18), tmp)),  # torch's zip writer: RuntimeError
            ("old.txt", lambda tmp: Path(tmp).write_bytes(b"new\n" * (1 << 18))),
        ]:
            with pytest.raises(OSError) as caught:
                atomic_write(str(disk / name), write)
            errors.append((caught.value.errno, caught.value.filename))
        left = sorted(os.listdir(disk))
        old = (disk / "old.txt").read_text()
    assert errors == [(errno.ENOSPC, str(disk / name)) for name in ("a.bin", "b.pt", "old.txt")]
    assert left == ["old.txt"] and old == "old\n"
