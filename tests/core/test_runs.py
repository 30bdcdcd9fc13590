"""The engine-neutral run layer: atomic writes, config, the pid lock, checkpoints, monitor CSV, progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retro_atari_kit.runs import (
    MonitorCSV,
    RunError,
    RunLock,
    agent_steps,
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
from retro_atari_kit.runs.layout import resume_segment
from retro_atari_kit.runs.monitor import START_FILE, write_segment_start
from retro_atari_kit.runs.progress import progress_parts


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


def _hold_lock(run: str) -> subprocess.Popen:
    """A real process that holds ``run``'s lock until it is killed."""
    code = (
        "import sys, time\n"
        "from retro_atari_kit.runs import RunLock\n"
        "RunLock(sys.argv[1]).acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, run], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_lock_refuses_a_live_holder_and_ignores_a_dead_one(tmp_path):
    run = str(tmp_path)
    write_config(run, new_config("sb3", ""))
    holder = _hold_lock(run)
    try:
        assert lock_owner(run) == holder.pid
        with pytest.raises(RunError, match=f"still training \\(pid {holder.pid}\\).*kill -TERM {holder.pid}"):
            RunLock(run).__enter__()
        with pytest.raises(RunError, match=f"--force refuses.*pid {holder.pid}"):
            create_run_dir(run, force=True)
    finally:
        holder.kill()  # SIGKILL: no clean-up, its .train.pid stays behind
        holder.wait()
    assert (tmp_path / ".train.pid").read_text().split()[0] == str(holder.pid)
    assert lock_owner(run) is None  # the kernel dropped the lock with the process
    with RunLock(run):
        assert (tmp_path / ".train.pid").read_text().split()[0] == str(os.getpid())
    assert not (tmp_path / ".train.pid").exists()


def test_a_lock_file_naming_an_unrelated_live_process_is_stale(tmp_path):
    # pids are reused: a .train.pid left by a killed trainer may name a live process that trains nothing
    run = str(tmp_path / "run")
    create_run_dir(run)
    write_config(run, new_config("sb3", ""))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(os.path.join(run, ".train.pid"), "w") as fh:
            fh.write(str(sleeper.pid))
        assert lock_owner(run) is None
        with RunLock(run):
            pass
        with open(os.path.join(run, ".train.pid"), "w") as fh:
            fh.write(f"{sleeper.pid} 12345.0\n")
        create_run_dir(run, force=True)  # --force clears it
        assert os.listdir(run) == []
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    run = str(tmp_path)
    with RunLock(run):
        with RunLock(run):
            assert lock_owner(run) is None  # ourselves
        assert (tmp_path / ".train.pid").exists()  # still held by the outer block
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from retro_atari_kit.runs import lock_owner; print(lock_owner(sys.argv[1]))",
                run,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert probe.stdout.strip() == str(os.getpid())
    assert not (tmp_path / ".train.pid").exists()


def test_of_processes_racing_for_the_lock_exactly_one_gets_it(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "from retro_atari_kit.runs import RunError, RunLock\n"
        "while not os.path.exists(sys.argv[2]): time.sleep(0.001)\n"
        "try:\n"
        "    with RunLock(sys.argv[1]):\n"
        "        print('got', flush=True)\n"
        "        while not os.path.exists(sys.argv[2] + '.end'): time.sleep(0.01)\n"
        "except RunError as exc:\n"
        "    print('refused', exc, flush=True)\n"
    )
    racers = [
        subprocess.Popen([sys.executable, "-c", code, run, str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = []
    try:
        import time

        time.sleep(2.0)  # all four are importing, then poll for the start signal
        go.write_text("")
        outs = [r.stdout.readline().strip() for r in racers]
        (tmp_path / "go.end").write_text("")
        for r in racers:
            r.wait(timeout=60)
    finally:
        for r in racers:
            if r.poll() is None:
                r.kill()
    assert sorted(o.split()[0] for o in outs) == ["got", "refused", "refused", "refused"], outs
    assert all("still training" in o for o in outs if o.startswith("refused"))
    assert not os.path.exists(os.path.join(run, ".train.pid"))


def test_checkpoints_are_listed_by_steps_files_and_directories(tmp_path):
    run = str(tmp_path)
    os.makedirs(os.path.dirname(checkpoint_path(run, 0)))
    for steps in (1000, 64, 200):
        open(checkpoint_path(run, steps), "wb").write(b"z")
    os.makedirs(checkpoint_path(run, 5000, suffix=""))  # a directory checkpoint (RLlib)
    open(os.path.join(tmp_path, "checkpoints", "replay_buffer.pkl"), "wb").write(b"r")
    assert [s for s, _ in list_checkpoints(run)] == [64, 200, 1000, 5000]


def test_final_model_is_an_independent_copy(tmp_path):
    checkpoint = tmp_path / "model_64_steps.zip"
    checkpoint.write_bytes(b"weights")
    final = tmp_path / "model.zip"
    final.write_bytes(b"older model")
    publish_final_model(str(checkpoint), str(final))
    assert final.read_bytes() == b"weights" and not os.path.samefile(final, checkpoint)
    with open(checkpoint, "r+b") as fh:  # damage the checkpoint in place: the final model keeps its bytes
        fh.write(b"XX")
    assert final.read_bytes() == b"weights"
    directory = tmp_path / "model_128_steps"
    directory.mkdir()
    (directory / "policy.pt").write_bytes(b"policy")
    os.symlink("model_128_steps", tmp_path / "model")  # how older versions published a directory
    publish_final_model(str(directory), str(tmp_path / "model"))
    assert (
        not os.path.islink(tmp_path / "model")
        and (tmp_path / "model" / "policy.pt").read_bytes() == b"policy"
    )
    assert sorted(os.listdir(tmp_path)) == ["model", "model.zip", "model_128_steps", "model_64_steps.zip"]


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
    import pandas  # SB3's monitor reader needs it (the dev extra)
    from stable_baselines3.common.monitor import load_results  # SB3's reader is the peer

    assert isinstance(load_results(monitor_dir(run)), pandas.DataFrame)


def _segments(run: str) -> None:
    """Two envs stepping together (their rows carry the steps of both so far), resumed from step 100."""
    first = MonitorCSV(monitor_dir(run), "RetroKit/Pong-v0", num_envs=2, segment_steps=True)
    first.write(0, 1.0, 10, 16)
    first.write(1, 2.0, 12, 20)
    first.close()
    write_segment_start(monitor_dir(run, 1), 100)
    resumed = MonitorCSV(monitor_dir(run, 1), "RetroKit/Pong-v0", num_envs=2, segment_steps=True)
    resumed.write(1, 3.0, 5, 8)
    resumed.close()


def test_the_run_steps_of_a_game_are_its_segments_start_plus_its_segment_steps(tmp_path):
    run = str(tmp_path)
    _segments(run)
    assert json.load(open(os.path.join(monitor_dir(run, 1), START_FILE))) == {"num_timesteps": 100}
    header = open(os.path.join(monitor_dir(run), "0.monitor.csv")).read().splitlines()[1]
    assert header == "r,l,t,segment_steps"
    games = read_monitor_csvs(run)
    assert games["run_steps"].tolist() == [16, 20, 108] and games["steps"].tolist() == [10, 22, 27]
    assert agent_steps(games) is games["run_steps"]
    # a row that is damaged leaves the others' counts whole; a file whose column line is lost is read as
    # the kit wrote it
    with open(os.path.join(monitor_dir(run), "0.monitor.csv"), "a") as fh:
        fh.write("\0\0\0\n")
    path = os.path.join(monitor_dir(run, 1), "1.monitor.csv")
    lines = open(path).read().splitlines(keepends=True)
    open(path, "w").write(lines[0] + "".join(lines[2:]))
    assert read_monitor_csvs(run)["run_steps"].tolist() == [16, 20, 108]


@pytest.mark.parametrize("missing", ["the start of a segment", "the column of a segment"])
def test_without_the_run_steps_of_every_game_the_curve_uses_the_finished_games_steps(tmp_path, missing):
    run = str(tmp_path)
    _segments(run)
    if missing == "the start of a segment":  # resumed before the kit recorded starts
        os.remove(os.path.join(monitor_dir(run, 1), START_FILE))
    else:  # a writer whose envs do not step together (RLlib's env runners)
        other = MonitorCSV(monitor_dir(run, 1), "RetroKit/Pong-v0", num_envs=2)
        other.write(0, 4.0, 6)
        other.close()
    games = read_monitor_csvs(run)
    assert "run_steps" not in games and agent_steps(games) is games["steps"]


def test_progress_parts_merge_into_one_table(tmp_path):
    run = str(tmp_path)
    open(progress_path(run), "w").write("time/total_timesteps,a\n64,1\n")
    open(progress_path(run, 1), "w").write("time/total_timesteps,b\n128,2\n")
    merge_progress(run)
    assert open(progress_path(run)).read().splitlines() == ["time/total_timesteps,a,b", "64,1,", "128,,2"]
    assert not os.path.exists(progress_path(run, 1))


def test_merge_survives_damaged_and_duplicated_parts(tmp_path):
    # two writers of one part file interleave rows (more fields than the header), a killed writer leaves a
    # cut-off line and NUL bytes, and a merge killed before removing its parts leaves them to merge again
    run = str(tmp_path)
    open(progress_path(run), "w").write("time/total_timesteps,a\n64,1\n")
    open(progress_path(run, 1), "w").write(
        "time/total_timesteps,b\n128,2\n128,2,time/total_timesteps,b\n192,3\n\0\0\0\n256,4,5,6\n"
    )
    note = merge_progress(run)
    assert open(progress_path(run)).read().splitlines() == [
        "time/total_timesteps,a,b",
        "64,1,",
        "128,,2",
        "192,,3",
    ]
    assert note is not None and "left out 2 damaged lines" in note and "orphaned-1" in note
    assert "256,4,5,6" in open(os.path.join(run, "orphaned-1", "progress.part1.csv")).read()
    open(progress_path(run, 2), "w").write("time/total_timesteps,b\n128,2\n320,5\n")  # 128: merged already
    assert merge_progress(run) is None
    assert open(progress_path(run)).read().splitlines()[-2:] == ["192,,3", "320,,5"]


def test_a_run_dir_whose_path_has_glob_characters_finds_its_own_files(tmp_path):
    # "[1]" in a path is a character class to glob: unescaped, a second resume reused monitor/resume-1
    # and the progress parts were never merged
    run = str(tmp_path / "sweep[1]*")
    os.makedirs(monitor_dir(run, 1))
    assert resume_segment(run) == 2
    open(progress_path(run), "w").write("time/total_timesteps,a\n64,1\n")
    for k, steps in ((10, 320), (2, 128)):
        open(progress_path(run, k), "w").write(f"time/total_timesteps,a\n{steps},{k}\n")
    assert progress_parts(run) == [progress_path(run, 2), progress_path(run, 10)]
    merge_progress(run)
    rows = open(progress_path(run)).read().splitlines()
    assert rows == ["time/total_timesteps,a", "64,1", "128,2", "320,10"]
    assert progress_parts(run) == []


def test_stop_signals_defer_sigint_and_sigterm_and_restore_the_handlers(tmp_path):
    import signal

    from retro_atari_kit.runs import StopRequested, stop_signals

    before = signal.getsignal(signal.SIGTERM)
    with stop_signals() as stop:
        with stop_signals() as inner:  # nested blocks share one request
            assert inner is stop
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to this process
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested and stop.signum == signal.SIGTERM  # the first one counts
        with pytest.raises(StopRequested, match="nothing was written") as info:
            create_run_dir(str(tmp_path / "run"))
        assert info.value.exit_code == 128 + signal.SIGTERM
    assert not (tmp_path / "run").exists()
    assert signal.getsignal(signal.SIGTERM) is before
    create_run_dir(str(tmp_path / "run"))  # outside a block, nothing is deferred
