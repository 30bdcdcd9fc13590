"""The engine-neutral run layer: atomic writes, config, the pid lock, checkpoints, monitor CSV, progress."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from retro_atari_kit.runs import (
    MonitorCSV,
    RunError,
    RunLock,
    atomic_write,
    atomic_write_text,
    checkpoint_path,
    create_run_dir,
    list_checkpoints,
    load_config,
    lock_owner,
    merge_progress,
    monitor_dir,
    new_config,
    progress_path,
    publish_final_model,
    read_monitor_csvs,
    write_config,
)


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    path = str(tmp_path / "config.yaml")
    atomic_write_text(path, "old")

    def fails(tmp: str) -> None:
        with open(tmp, "w") as fh:
            fh.write("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(path, fails)
    assert open(path).read() == "old" and os.listdir(tmp_path) == ["config.yaml"]


def test_atomic_write_replaces_a_directory_as_a_whole(tmp_path):
    target = tmp_path / "ckpt"
    for content in ("first", "second"):

        def write(tmp: str, content: str = content) -> None:
            os.makedirs(tmp)
            open(os.path.join(tmp, "state"), "w").write(content)

        atomic_write(str(target), write)
    assert (target / "state").read_text() == "second" and sorted(os.listdir(tmp_path)) == ["ckpt"]


def test_config_round_trip_and_errors(tmp_path):
    run = str(tmp_path / "run")
    create_run_dir(run)
    write_config(run, new_config("rllib", "retrokit train ...", algo="appo", env_id="RetroKit/Pong-v0"))
    config = load_config(run)
    assert (
        config["engine"] == "rllib" and config["algo"] == "appo" and config["kind"] == "retro-atari-kit run"
    )
    with pytest.raises(RunError, match="unknown engine 'tf'"):
        new_config("tf", "")
    with pytest.raises(RunError, match="no config.yaml"):
        load_config(str(tmp_path))
    (tmp_path / "config.yaml").write_text("kind: something else\n")
    with pytest.raises(RunError, match="not written by retrokit"):
        load_config(str(tmp_path))
    with pytest.raises(RunError, match="exists.*--resume.*--force"):
        create_run_dir(run)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "precious.txt").write_text("x")
    with pytest.raises(RunError, match="not a retrokit run dir"):
        create_run_dir(str(tmp_path / "other"), force=True)
    assert (tmp_path / "other" / "precious.txt").exists()


def test_lock_refuses_a_live_owner_and_ignores_a_dead_one(tmp_path):
    run = str(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".train.pid").write_text(str(sleeper.pid))
        assert lock_owner(run) == sleeper.pid
        with pytest.raises(RunError, match=f"pid {sleeper.pid}"):
            RunLock(run).__enter__()
        with pytest.raises(RunError, match="--force refuses"):
            write_config(run, new_config("sb3", ""))
            create_run_dir(run, force=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert lock_owner(run) is None  # stale: its process is gone
    with RunLock(run):
        assert (tmp_path / ".train.pid").read_text() == str(os.getpid())
    assert not (tmp_path / ".train.pid").exists()


def test_checkpoints_are_listed_by_steps_files_and_directories(tmp_path):
    run = str(tmp_path)
    os.makedirs(os.path.dirname(checkpoint_path(run, 0)))
    for steps in (1000, 64, 200):
        open(checkpoint_path(run, steps), "wb").write(b"z")
    os.makedirs(checkpoint_path(run, 5000, suffix=""))  # a directory checkpoint (RLlib)
    open(os.path.join(tmp_path, "checkpoints", "replay_buffer.pkl"), "wb").write(b"r")
    assert [s for s, _ in list_checkpoints(run)] == [64, 200, 1000, 5000]


def test_final_model_is_a_hard_link_not_a_copy(tmp_path):
    checkpoint = tmp_path / "model_64_steps.zip"
    checkpoint.write_bytes(b"weights")
    final = tmp_path / "model.zip"
    final.write_bytes(b"older model")
    publish_final_model(str(checkpoint), str(final))
    assert os.path.samefile(final, checkpoint) and final.read_bytes() == b"weights"
    directory = tmp_path / "model_128_steps"
    directory.mkdir()
    publish_final_model(str(directory), str(tmp_path / "model"))
    assert os.path.samefile(tmp_path / "model", directory)


def test_monitor_writer_and_reader_agree(tmp_path):
    run = str(tmp_path)
    first = MonitorCSV(monitor_dir(run), "RetroKit/Pong-v0", num_envs=2)
    first.write(0, -21.0, 800)
    first.write(1, -20.0, 900)
    first.close()
    resumed = MonitorCSV(monitor_dir(run, 1), "RetroKit/Pong-v0", num_envs=1)
    resumed.write(0, 5.5, 100)
    resumed.close()
    lines = open(os.path.join(monitor_dir(run), "0.monitor.csv")).read().splitlines()
    assert lines[0].startswith('#{"t_start": ') and lines[1] == "r,l,t" and lines[2].startswith("-21.0,800,")
    games = read_monitor_csvs(run)
    assert games["r"].tolist() == [-21.0, -20.0, 5.5] and games["steps"].tolist() == [800, 1700, 1800]
    pandas = pytest.importorskip("pandas", reason="SB3's monitor reader needs pandas")
    sb3_monitor = pytest.importorskip("stable_baselines3.common.monitor", reason="SB3's reader is the peer")
    assert isinstance(sb3_monitor.load_results(monitor_dir(run)), pandas.DataFrame)


def test_progress_parts_merge_into_one_table(tmp_path):
    run = str(tmp_path)
    open(progress_path(run), "w").write("time/total_timesteps,a\n64,1\n")
    open(progress_path(run, 1), "w").write("time/total_timesteps,b\n128,2\n")
    merge_progress(run)
    assert open(progress_path(run)).read().splitlines() == ["time/total_timesteps,a,b", "64,1,", "128,,2"]
    assert not os.path.exists(progress_path(run, 1))
