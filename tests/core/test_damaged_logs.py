"""Damaged logs: monitor CSVs and progress tables with bytes that are not UTF-8, NUL bytes, lost
header lines, cut-off lines or nothing at all never make ``retrokit plot`` or ``retrokit train --resume``
fail; a refused resume leaves every byte of the run dir as it was; an export kept inside a run is not
plotted twice. Every run here is written by the kit itself (one tiny real PPO run on Pong), then damaged."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from retro_atari_kit.cli import main
from retro_atari_kit.runs import read_monitor_csvs

ENV = "RetroKit/Pong-v0"
TINY = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=64", "--checkpoint-every", "64"]
MONITOR = os.path.join("monitor", "0.monitor.csv")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> str:
    """A finished 64-step run; a game of Pong takes far longer, so two games per env are added in the
    writer's own row format (``r,l,t,segment_steps``, seconds since the file's ``t_start``), ending before the
    run did."""
    run = str(tmp_path_factory.mktemp("runs") / "pong")
    assert main(["train", "ppo", ENV, "--timesteps", "64", "--run-dir", run, *TINY]) == 0
    for rank in (0, 1):
        with open(os.path.join(run, "monitor", f"{rank}.monitor.csv"), "a", encoding="utf-8") as fh:
            fh.write(
                f"-21.0,{800 + rank},{0.001 + rank / 1000},32\n-20.0,{900 + rank},{0.002 + rank / 1000},64\n"
            )
    return run


def _copy(trained_run: str, tmp_path) -> str:
    run = str(tmp_path / "run")
    shutil.copytree(trained_run, run)
    return run


def _digest(run_dir: str) -> dict[str, str]:
    """Every file and folder under ``run_dir`` with a hash of its bytes (folders: "dir")."""
    out = {}
    for root, dirs, files in os.walk(run_dir):
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), run_dir)] = "dir"
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, run_dir)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _plot(run: str, tmp_path, capsys) -> tuple[str, list[str]]:
    capsys.readouterr()
    assert main(["plot", run, "--out", str(tmp_path / "c.png")]) == 0
    captured = capsys.readouterr()
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    return captured.out, captured.err.strip().splitlines()


HEADER = b'#{"t_start": 1700000000.0, "env_id": "RetroKit/Pong-v0"}\n'
GAMES = b"-21.0,800,5.0\n-19.0,900,9.0\n"

# name -> (bytes of monitor/0.monitor.csv, words of its one warning or None for no warning, its games)
DAMAGE = {
    "not utf-8": (HEADER + b"r,l,t\n" + GAMES + b"-2\xff\xfe.0,800,10.0\n", "skipped 1 row", 2),
    "nul bytes": (HEADER + b"r,l,t\n" + GAMES + b"\0\0\0\0\0\0\n\0\0", "skipped 1 row", 2),
    "nul in a row": (HEADER + b"r,l,t\n-21.0,8\x0000,5.0\n-19.0,900,9.0\n", "skipped 1 row", 1),
    "null t_start": (b'#{"t_start": null, "env_id": null}\nr,l,t\n' + GAMES, "no start time", 2),
    "header cut short": (b'#{"t_start": 17000\nr,l,t\n' + GAMES, "no start time", 2),
    "no json line": (b"r,l,t\n" + GAMES, "no start time", 2),
    "no r,l,t line": (HEADER + GAMES, "no r,l,t header line; its rows are read as r,l,t", 2),
    "no header at all": (GAMES, "no r,l,t header line", 2),
    "last line cut": (HEADER + b"r,l,t\n" + GAMES + b"-20.0,8", None, 2),
    "empty": (b"", "empty", 0),
    "only garbage": (b"\x00\x01\x02garbage\n\xff\n", "not a monitor CSV", 0),
    "not numbers": (HEADER + b"r,l,t\n" + GAMES + b"nan,1,2\nabc,def,ghi\n,,\n", "skipped 3 row", 2),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_plot_reads_past_a_damaged_monitor_csv(name, trained_run, tmp_path, capsys):
    content, words, games = DAMAGE[name]
    run = _copy(trained_run, tmp_path)
    with open(os.path.join(run, MONITOR), "wb") as fh:
        fh.write(content)
    out, err = _plot(run, tmp_path, capsys)
    if words is None:
        assert err == []
    else:
        (line,) = err  # one line for the file, whatever is wrong with it
        assert line.startswith(f"retrokit: warning: {os.path.join(run, MONITOR)}: ") and words in line, line
    assert f"{run}: {games + 2} games" in out  # the other env's two games are always there
    assert read_monitor_csvs(run)["r"].size == games + 2


def test_plot_names_a_file_it_cannot_read_and_goes_on(trained_run, tmp_path, capsys):
    run = _copy(trained_run, tmp_path)
    os.remove(os.path.join(run, MONITOR))
    os.mkdir(os.path.join(run, MONITOR))  # a folder under a monitor CSV's name: no reader can open it
    out, err = _plot(run, tmp_path, capsys)
    assert len(err) == 1 and os.path.join(run, MONITOR) in err[0] and "cannot be read" in err[0]
    assert f"{run}: 2 games" in out


def test_an_export_inside_the_run_dir_is_not_plotted_twice(trained_run, tmp_path, capsys):
    run = _copy(trained_run, tmp_path)
    before = read_monitor_csvs(run)
    assert main(["export", run, os.path.join(run, "export")]) == 0
    assert os.path.isfile(os.path.join(run, "export", MONITOR))
    after = read_monitor_csvs(run)
    assert after["r"].tolist() == before["r"].tolist() == [-21.0, -21.0, -20.0, -20.0]
    out, err = _plot(run, tmp_path, capsys)
    assert err == [] and f"{run}: 4 games" in out
    assert read_monitor_csvs(os.path.join(run, "export"))["r"].size == 4  # the export plots on its own


def _damage_logs(run: str) -> None:
    with open(os.path.join(run, MONITOR), "ab") as fh:
        fh.write(b"-2\xff.0,800,0.003\n\0\0\0\0\n-20.0,8")  # not UTF-8, NUL bytes, a cut-off last line
    with open(os.path.join(run, "monitor", "1.monitor.csv"), "wb") as fh:
        fh.write(b"")  # emptied by a crash
    with open(os.path.join(run, "progress.csv"), "ab") as fh:
        fh.write(b"\xff\xfe,\0\0\n\0\0\0\0\0\n12")


def test_resume_reads_past_damaged_logs(trained_run, tmp_path, capsys):
    run = _copy(trained_run, tmp_path)
    _damage_logs(run)
    with open(os.path.join(run, "progress.part1.csv"), "wb") as fh:  # a resume killed while logging
        fh.write(b"time/total_timesteps,x\n\xff\xff\n\0\0\0")
    assert main(["train", "--resume", run, "--timesteps", "128"]) == 0, capsys.readouterr().err
    assert os.path.isfile(os.path.join(run, "checkpoints", "model_128_steps.zip"))
    assert os.path.isdir(os.path.join(run, "monitor", "resume-1"))
    games = read_monitor_csvs(run)
    assert games["r"].tolist() == [-21.0, -20.0]  # env 0: its good games; env 1: emptied


@pytest.mark.parametrize(
    "config",
    [
        b"\xff\xfe\x00k\x00i\x00n\x00d\x00",  # not UTF-8 (UTF-16 bytes)
        b"kind: retro-atari-kit run\n\0\0\0\0\n",  # NUL bytes
        b"",  # emptied
        None,  # cut in half
        "algo=dqn",  # readable, but refused by the later checks (under the lock)
    ],
    ids=["not-utf8", "nul", "empty", "half", "algo"],
)
def test_a_refused_resume_leaves_every_byte_as_it_was(config, trained_run, tmp_path, capsys):
    run = _copy(trained_run, tmp_path)
    _damage_logs(run)
    path = os.path.join(run, "config.yaml")
    with open(path, "rb") as fh:
        text = fh.read()
    if config is None:
        config = text[: len(text) // 2]
    elif config == "algo=dqn":
        config = text.replace(b"algo: ppo", b"algo: dqn")
    with open(os.path.join(run, "progress.part1.csv"), "wb") as fh:  # what a merge would rewrite
        fh.write(b"time/total_timesteps,x\n999,1\n")
    with open(path, "wb") as fh:
        fh.write(config)
    before = _digest(run)
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "640"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("retrokit: error: "), err
    assert _digest(run) == before
