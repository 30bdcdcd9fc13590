"""``retrokit eval --out``: where the eval records go is checked before a model is loaded or a game played,
and no two targets share a record file. Real runs (the 64-step tiny run, copied), real processes."""

from __future__ import annotations

import os
import shutil

import pytest

from retro_atari_kit.cli import main
from tests.cli._run import one_error_line, retrokit, snapshot


@pytest.fixture
def two_runs(tiny_run, tmp_path) -> str:
    """``a/run`` and ``b/run``: two runs that share a name, in the test's own folder."""
    for parent in ("a", "b"):
        shutil.copytree(tiny_run, tmp_path / parent / "run")
    return str(tmp_path)


@pytest.mark.parametrize(
    ("targets", "needle"),
    [
        (["a/run", "b/run"], "a/run and b/run would both be written to ev/run.training.json"),
        (
            ["a/run", "a/run/model.zip"],
            "a/run and a/run/model.zip would both be written to ev/run.training.json",
        ),
        (["a/run", "a/run/"], "a/run/ is given twice"),
        (["a/run", "a/run"], "a/run is given twice"),
    ],
)
def test_targets_that_share_a_record_file_are_refused_before_playing(
    two_runs, monkeypatch, capsys, targets, needle
):
    monkeypatch.chdir(two_runs)
    before = snapshot(two_runs)
    assert main(["eval", *targets, "--episodes", "1", "--out", "ev"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"retrokit: error: {needle}"), err
    assert snapshot(two_runs) == before  # nothing played, nothing written


@pytest.mark.parametrize(
    ("out", "setup", "needle"),
    [
        (
            "/proc/ev",
            None,
            "--out /proc/ev/run.training.json: No such file or directory; /proc is the kernel's",
        ),
        ("x" * 300, None, "File name too long"),
        ("afile", "file", "--out afile: not a folder"),
        ("afile/ev", "file", "afile is a file, not a folder"),
        (
            "ev",
            "record folder",
            "--out ev: ev/run.training.json is a folder where the eval record of a/run goes",
        ),
    ],
)
def test_an_out_that_cannot_take_the_record_is_refused_before_playing(
    two_runs, monkeypatch, capsys, out, setup, needle
):
    monkeypatch.chdir(two_runs)
    if setup == "file":
        with open("afile", "w") as f:
            f.write("mine\n")
    elif setup == "record folder":
        os.makedirs("ev/run.training.json")
    before = snapshot(two_runs)
    assert main(["eval", "a/run", "--episodes", "1", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "game 1/1" not in err, err
    assert snapshot(two_runs) == before


def test_a_read_only_out_is_refused_before_playing(two_runs):
    os.makedirs(os.path.join(two_runs, "ro"))
    os.chmod(os.path.join(two_runs, "ro"), 0o555)
    try:
        before = snapshot(two_runs)
        res = retrokit("eval", "a/run", "--episodes", "1", "--out", "ro/ev", cwd=two_runs, modes_bind=True)
        one_error_line(res, "--out ro/ev/run.training.json: Permission denied", "ro is not writable")
        assert snapshot(two_runs) == before
    finally:
        os.chmod(os.path.join(two_runs, "ro"), 0o755)
