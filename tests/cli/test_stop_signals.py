"""Real schedulers stop a job by signalling its whole process group (systemd, Slurm's ``scancel``,
``kill -TERM -PGID``) or by closing its terminal: ``retrokit train`` must save a stop checkpoint and exit 0
exactly as on Ctrl-C, whatever processes its envs run in. Real processes, real signals, real training.

Each case starts the command in its own session (its own process group), waits for a periodic checkpoint,
signals the group, and checks: exit code 0, a stop checkpoint past every periodic one there was, nothing
half-written or locked, no process of the group left, and a ``--resume`` that continues from it.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from retro_atari_kit.runs import list_checkpoints, load_config
from tests.cli._run import RLLIB_PROGRESS, RLLIB_TINY

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "retro_atari_kit.cli"]
ENV = "RetroKit/Pong-v0"
RETRO_ENV = "RetroKit/Airstriker-Genesis-v0"
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
PPO = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "64"]
# DQN with its envs in a play process (on a CPU learner only with `when: always`), a small replay
PLAY = [
    "--preset", "pong-dqn-fast", "--set", "parallel_play.when=always", "--set", "learning_starts=64",
    "--set", "buffer_size=1000", "--n-envs", "2", "--checkpoint-every", "128",
]  # fmt: skip
RLLIB = [*RLLIB_TINY, "--checkpoint-every", "32"]


def _leftovers(run: str) -> list[str]:
    """Temporaries of atomic writes and the lock file: none may outlive a command."""
    names = glob.glob(os.path.join(run, "**", ".*tmp*"), recursive=True)
    return names + glob.glob(os.path.join(run, ".train.pid"))


def _steps_of(path: str) -> int:
    from stable_baselines3 import PPO

    return int(PPO.load(path, device="cpu").num_timesteps)


def start(tmp_path, *argv: str, **kwargs) -> subprocess.Popen:
    """``retrokit`` in its own session, output to files (read with :func:`output`)."""
    kwargs.setdefault("stdout", open(tmp_path / "stdout.txt", "w"))  # noqa: SIM115 - the child's
    kwargs.setdefault("stderr", open(tmp_path / "stderr.txt", "w"))  # noqa: SIM115
    return subprocess.Popen([*CLI, *argv], start_new_session=True, env=CHILD_ENV, **kwargs)


def output(tmp_path) -> str:
    return "".join(
        (tmp_path / name).read_text(errors="replace")
        for name in ("stdout.txt", "stderr.txt")
        if (tmp_path / name).exists()
    )


def _alive(pid: int) -> bool:
    """True unless ``pid`` is gone or a zombie (an orphan this container's init may never reap)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(name))
    return pids


def assert_group_ends(pgid: int, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not group_members(pgid), f"processes of the group outlived the command: {group_members(pgid)}"


def signal_group_after_a_checkpoint(proc: subprocess.Popen, tmp_path, run: str, sig: int) -> list[int]:
    """Once the run has a periodic checkpoint, send ``sig`` to the command's whole process group; wait for
    the command to end. Returns the steps of the checkpoints that existed when the signal was sent."""
    deadline = time.monotonic() + 400
    while not list_checkpoints(run):
        assert proc.poll() is None, output(tmp_path)[-3000:]
        assert time.monotonic() < deadline, "no periodic checkpoint in time"
        time.sleep(0.1)
    before = [steps for steps, _ in list_checkpoints(run)]
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return before


def assert_stopped_and_resumable(tmp_path, proc: subprocess.Popen, run: str, before: list[int], more: int):
    """The stop checkpoint is past every checkpoint ``before`` the signal; ``--resume`` continues from it."""
    text = output(tmp_path)
    assert proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    steps, path = list_checkpoints(run)[-1]
    assert f"interrupted at {steps} steps; checkpoint {path}" in text, text[-3000:]
    assert steps > max(before)
    assert not _leftovers(run)
    assert_group_ends(proc.pid)
    resumed = subprocess.run(
        [*CLI, "train", "--resume", run, "--timesteps", str(steps + more)],
        capture_output=True,
        text=True,
        env=CHILD_ENV,
        timeout=400,
    )
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert f"resuming from {path} ({steps} steps)" in resumed.stdout
    assert list_checkpoints(run)[-1][0] >= steps + more


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["ppo", ENV, "--backend", "native", *PPO], id="native"),
        pytest.param(["ppo", ENV, "--backend", "subprocess", *PPO], id="subprocess"),
        pytest.param(["ppo", ENV, "--backend", "inprocess", *PPO], id="inprocess"),
        pytest.param(["ppo", RETRO_ENV, *PPO], id="retro-subprocess"),
        pytest.param(["dqn", ENV, *PLAY], id="parallel-play"),
    ],
)
def test_sigterm_to_the_process_group_saves_and_exits_0(tmp_path, argv):
    run = str(tmp_path / "run")
    proc = start(tmp_path, "train", *argv, "--timesteps", "1e6", "--run-dir", run)
    before = signal_group_after_a_checkpoint(proc, tmp_path, run, signal.SIGTERM)
    assert_stopped_and_resumable(tmp_path, proc, run, before, more=64)


def test_sighup_with_the_terminal_gone_saves_and_exits_0(tmp_path):
    # closing a terminal: SIGHUP to the job, and nobody reads its output any more
    run = str(tmp_path / "run")
    proc = start(tmp_path, "train", "ppo", ENV, *PPO, "--timesteps", "1e6", "--run-dir", run,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    os.read(proc.stdout.fileno(), 1)
    proc.stdout.close()
    proc.stderr.close()
    before = signal_group_after_a_checkpoint(proc, tmp_path, run, signal.SIGHUP)
    assert proc.returncode == 0
    steps, path = list_checkpoints(run)[-1]
    assert steps > max(before) and _steps_of(path) == steps
    assert not _leftovers(run)
    assert_group_ends(proc.pid)


@pytest.mark.timeout(900)
def test_rllib_run_stopped_by_its_group_resumes_by_its_relative_path_then_eval_record_plot(tmp_path):
    """The RLlib engine's whole life in one run (one Ray start per command, the slowest part): APPO started
    with a relative run dir, SIGTERM to its process group after a periodic checkpoint (a stop checkpoint,
    exit 0), ``--resume`` with the relative path it printed (RLlib reads paths as URIs: this once failed
    inside pyarrow) and nothing of Ray's in the terminal (its messages in log.txt, progress lines with a
    true score or none yet, never ``None``), then ``eval``, ``record`` and ``plot`` read the RLlib run dir
    like an SB3 one."""
    # Ray's GCS and raylet run in the driver's process group and shut down on SIGTERM; started with the stop
    # signals blocked they live until the driver has saved (its env runners have groups of their own)
    run = str(tmp_path / "runs" / "x")
    proc = start(tmp_path, "train", "appo", ENV, *RLLIB, "--timesteps", "1e6", "--run-dir", "runs/x",
                 cwd=tmp_path)  # fmt: skip
    before = signal_group_after_a_checkpoint(proc, tmp_path, run, signal.SIGTERM)
    text = output(tmp_path)
    assert proc.returncode == 0 and "Traceback" not in text, text[-3000:]
    stopped_at, path = list_checkpoints(run)[-1]
    # the signal can land before the next iteration ends: then the stop checkpoint is the periodic one's step
    assert stopped_at >= max(before) and os.path.isfile(os.path.join(path, "policy.pt"))
    assert f"interrupted at {stopped_at} steps; checkpoint" in text, text[-3000:]
    printed = [line.split("--resume ", 1)[1] for line in text.splitlines() if "train --resume " in line]
    assert printed and os.path.samefile(tmp_path / printed[-1], run), text[-3000:]
    assert not _leftovers(run)
    assert_group_ends(proc.pid)
    config = load_config(run)
    assert config["engine"] == "rllib" and config["algo"] == "appo"
    assert config["hyperparameters"]["train_batch_size_per_learner"] == 32
    assert not os.path.exists(os.path.join(run, "model")), "an interrupted run has no final model"
    assert os.path.isfile(os.path.join(run, "monitor", "0.monitor.csv"))
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(run))

    def retrokit(*argv: str) -> subprocess.CompletedProcess:
        done = subprocess.run([*CLI, *argv], cwd=tmp_path, capture_output=True, text=True, env=CHILD_ENV,
                              timeout=400)  # fmt: skip
        assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout + done.stderr)[-3000:]
        return done

    total = stopped_at + 32
    resume = retrokit("train", "--resume", "runs/x", "--timesteps", str(total))
    resumed = resume.stdout
    assert f"resuming from {os.path.relpath(path, tmp_path)} ({stopped_at} steps)" in resumed
    # quiet: Ray's warnings and its workers' lines go to log.txt, the progress lines are the kit's own
    assert resume.stderr.strip() == "", resume.stderr[-3000:]
    assert "None" not in resumed
    progress = [line for line in resumed.splitlines() if " steps/s, " in line]
    assert progress and all(RLLIB_PROGRESS.match(line) for line in progress), progress
    with open(os.path.join(run, "log.txt"), encoding="utf-8") as fh:
        log = fh.read()
    assert "---- Ray's own messages, " in log and re.search(r"^iter \S+ steps \d+", log, re.M), log[-2000:]
    assert f"Ray's own messages: {os.path.join(run, 'log.txt')}" in resumed, resumed[-2000:]
    with open(os.path.join(run, "progress.csv"), newline="") as fh:
        steps = [int(float(row["time/total_timesteps"])) for row in csv.DictReader(fh)]
    assert steps == sorted(steps) and steps[-1] >= total and min(steps) < stopped_at
    assert not any(name.startswith("progress.part") for name in os.listdir(run)), "parts merged"
    assert os.path.isdir(os.path.join(run, "monitor", "resume-1"))
    final_steps, final_ckpt = list_checkpoints(run)[-1]
    assert final_steps >= total
    # the final model: an independent copy of the last checkpoint's policy
    assert not os.path.islink(os.path.join(run, "model"))
    with open(os.path.join(run, "model", "policy.pt"), "rb") as a, open(f"{final_ckpt}/policy.pt", "rb") as b:
        assert a.read() == b.read()

    evaluated = retrokit("eval", "runs/x", "--episodes", "1", "--json").stdout
    line = next(x for x in evaluated.splitlines() if x.startswith("{"))
    assert f'"steps": {final_steps}' in line and '"episodes": 1' in line
    # a whole game of Pong: one side reaches 21, so the true score is never 0
    score = json.loads(line)["scores"][0]
    assert -21 <= score <= 21 and score != 0
    retrokit("record", "runs/x", "--out", "agent.gif", "--max-steps", "30")
    assert os.path.getsize(tmp_path / "agent.gif") > 1000
    retrokit("plot", "runs/x", "--out", "curves.png")
    assert os.path.getsize(tmp_path / "curves.png") > 1000


# the retro env worker: a second stable-retro env in a process that has one runs in a worker process
RETRO_WORKER = textwrap.dedent(
    """
    import gymnasium as gym
    import retro_atari_kit
    from retro_atari_kit.runs import stop_signals

    first = gym.make("RetroKit/Airstriker-Genesis-v0")
    second = gym.make("RetroKit/Airstriker-Genesis-v0")
    assert type(second.unwrapped).__name__ == "RetroWorkerEnv", type(second.unwrapped)
    with stop_signals() as stop:
        second.reset(seed=0)
        print("ready", flush=True)
        while not stop.requested:
            second.step(second.action_space.sample())
        for _ in range(50):  # the worker outlived the group's signal: the owner closes it after saving
            second.step(second.action_space.sample())
    second.close()
    first.close()
    print("stepped on after signal", stop.signum, flush=True)
    """
)


def test_the_retro_env_worker_outlives_a_sigterm_to_the_group(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", RETRO_WORKER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, env=CHILD_ENV,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert f"stepped on after signal {int(signal.SIGTERM)}" in out
    assert_group_ends(proc.pid)


ORPHANED = textwrap.dedent(
    """
    import time
    from retro_atari_kit.vector import make_vector_env

    if __name__ == "__main__":
        venv = make_vector_env("Pong", 2, backend="subprocess")
        venv.reset(seed=0)
        print(" ".join(str(w.pid) for w in venv.driver.workers), flush=True)
        time.sleep(600)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_workers_end_with_a_parent_that_no_signal_handler_saved(tmp_path, sig):
    # a script of the user's with no stop handling: the group's SIGTERM ends it, its workers ignore the
    # signal, and end because their parent did (EOF on their pipes), as they do after a SIGKILL
    script = tmp_path / "orphaned.py"
    script.write_text(ORPHANED)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=CHILD_ENV,
    )
    try:
        workers = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(pid) for pid in workers)
        os.killpg(proc.pid, sig)
        assert proc.wait(timeout=60) == -sig
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)], "a worker outlived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


# Ctrl-C while the command is still importing the kit: a script named `retrokit` (as the console script
# is) that sends itself SIGINT when numpy starts being imported, deep inside `import retro_atari_kit`
INTERRUPTED_IMPORT = textwrap.dedent(
    """
    import os
    import signal
    import sys


    class SigintOnNumpy:
        def find_spec(self, name, path=None, target=None):
            if name == "numpy":
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None


    sys.meta_path.insert(0, SigintOnNumpy())
    from retro_atari_kit.cli import main

    sys.exit(main())
    """
)


def test_ctrl_c_while_importing_is_one_line_and_exit_130(tmp_path):
    script = tmp_path / "retrokit"
    script.write_text(INTERRUPTED_IMPORT)
    run = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, str(script), "train", "ppo", ENV, "--run-dir", str(run)],
        capture_output=True, text=True, env=CHILD_ENV, cwd=str(tmp_path), timeout=120,
    )  # fmt: skip
    assert res.returncode == 130, res.stderr
    assert res.stderr == "retrokit: interrupted\n" and res.stdout == ""
    assert not run.exists()
    # a program that imports the kit keeps Python's own KeyboardInterrupt
    script.rename(tmp_path / "other.py")
    res = subprocess.run(
        [sys.executable, str(tmp_path / "other.py")],
        capture_output=True,
        text=True,
        env=CHILD_ENV,
        timeout=120,
    )
    assert "Traceback" in res.stderr and "KeyboardInterrupt" in res.stderr


@pytest.mark.parametrize("closed", ["stdout", "stderr", "both"])
def test_closed_output_does_not_stop_or_fail_a_run(tmp_path, closed):
    # `retrokit train ... >&-` (and 2>&-): Python starts without the stream; the run trains on, exit 0
    run = str(tmp_path / "run")
    redirect = {"stdout": ">&-", "stderr": "2>&-", "both": ">&- 2>&-"}[closed]
    cmd = " ".join([*CLI, "train", "ppo", ENV, *PPO, "--timesteps", "128", "--run-dir", run])
    res = subprocess.run(
        ["sh", "-c", f"exec {cmd} {redirect}"], capture_output=True, text=True, env=CHILD_ENV, timeout=400
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "Traceback" not in res.stdout + res.stderr
    assert _steps_of(os.path.join(run, "model.zip")) == 128
    assert not _leftovers(run)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_reader_that_goes_away_does_not_stop_or_fail_a_run(tmp_path, stream):
    # `retrokit train ... | head -1`: the reader of one stream is gone after one line; the other is kept
    run = str(tmp_path / "run")
    pipes = {stream: subprocess.PIPE}
    proc = start(tmp_path, "train", "ppo", ENV, *PPO, "--timesteps", "128", "--run-dir", run, **pipes)
    reader = getattr(proc, stream)
    assert os.read(reader.fileno(), 1)  # stdout: the first line of the config; stderr: the progress bar
    reader.close()
    assert proc.wait(timeout=400) == 0, output(tmp_path)[-3000:]
    assert "Traceback" not in output(tmp_path)
    assert _steps_of(os.path.join(run, "model.zip")) == 128
    assert not _leftovers(run)
