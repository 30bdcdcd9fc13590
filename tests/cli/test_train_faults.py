"""``retrokit train`` under races, signals and hand-edited runs: real processes, real signals, real PPO steps.

Each fault must leave either nothing (a command that failed) or a run that resumes; never a dir that says
"exists" to a new run and "no checkpoint" to ``--resume``, a stale lock, or a half-written checkpoint.
"""

from __future__ import annotations

import csv
import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from retro_atari_kit.cli import main
from retro_atari_kit.runs import list_checkpoints

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"
TINY = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]
CLI = [sys.executable, "-m", "retro_atari_kit.cli"]


def _totals(run: str) -> list[int]:
    with open(os.path.join(run, "progress.csv"), newline="") as fh:
        return [int(float(row["time/total_timesteps"])) for row in csv.DictReader(fh)]


def _leftovers(run: str) -> list[str]:
    """Temporaries of atomic writes and the lock file: none may outlive a command."""
    names = glob.glob(os.path.join(run, "**", ".*tmp*"), recursive=True)
    return names + glob.glob(os.path.join(run, ".train.pid"))


def _steps_of(path: str) -> int:
    from stable_baselines3 import PPO

    return int(PPO.load(path, device="cpu").num_timesteps)


def test_resumes_started_together_exactly_one_trains(run_copy):
    run = run_copy
    cmd = [*CLI, "train", "--resume", run, "--timesteps", "320"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    try:
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2, 2], results
    for (_, err), code in zip(results, codes, strict=True):
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and "still training" in err, err
    assert _steps_of(os.path.join(run, "model.zip")) == 320
    assert sorted(os.listdir(os.path.join(run, "monitor"))) == ["0.monitor.csv", "resume-1"]
    totals = _totals(run)
    assert totals == sorted(set(totals)) and totals[-1] == 320  # one segment's rows, no interleaving
    assert not _leftovers(run)
    assert main(["train", "--resume", run, "--timesteps", "352"]) == 0  # and it still resumes


def test_a_second_signal_during_the_checkpoint_save_waits_for_it(tmp_path):
    run = str(tmp_path / "run")
    # --checkpoint-every 0: the only checkpoint is the one the stop saves, so a temporary file in
    # checkpoints/ means that save is under way
    cmd = [
        *CLI,
        "train",
        "ppo",
        ENV,
        "--timesteps",
        "1e6",
        "--run-dir",
        run,
        *TINY,
        "--checkpoint-every",
        "0",
    ]
    err = open(tmp_path / "stderr.txt", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    ckpts = os.path.join(run, "checkpoints")
    signalled_during_save = 0
    try:
        while not os.path.exists(os.path.join(run, "progress.csv")) or len(_totals(run)) < 2:
            assert proc.poll() is None, open(tmp_path / "stderr.txt").read()
            time.sleep(0.05)  # training is under way once PPO logged two rollouts
        proc.send_signal(signal.SIGINT)
        while proc.poll() is None:
            saving = os.path.isdir(ckpts) and any(".tmp-" in name for name in os.listdir(ckpts))
            if saving:
                proc.send_signal(signal.SIGTERM)
                signalled_during_save += 1
            elif signalled_during_save:
                break  # the save is over: later signals would meet the shell's default, not the run
            time.sleep(0.001)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        err.close()
    reader.join(timeout=10)
    assert signalled_during_save, "never saw the checkpoint being written"
    assert proc.returncode == 0, open(tmp_path / "stderr.txt").read()
    stopped = next(line for line in lines if line.startswith("interrupted at"))
    steps, path = list_checkpoints(run)[-1]
    assert stopped.startswith(f"interrupted at {steps} steps") and _steps_of(path) == steps >= 64
    assert not _leftovers(run)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_right_after_config_yaml_appears_leaves_no_half_made_run(tmp_path, sig):
    run = str(tmp_path / "run")
    cmd = [*CLI, "train", "ppo", ENV, "--timesteps", "1e6", "--run-dir", run, *TINY]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not os.path.exists(os.path.join(run, "config.yaml")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.001)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, (out, err)
    assert err.strip().splitlines()[-1] == "retrokit: interrupted before training started", err
    assert f"nothing was saved; removed {run}" in out
    assert not os.path.exists(run)  # the same command can simply be run again


def test_resume_and_force_ignore_a_lock_file_naming_an_unrelated_process(run_copy, capsys):
    run = run_copy
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        for argv in (
            ["train", "--resume", run, "--timesteps", "96"],
            ["train", "ppo", ENV, "--run-dir", run],
        ):
            with open(os.path.join(run, ".train.pid"), "w") as fh:  # left by a SIGKILLed trainer; pid reused
                fh.write(f"{sleeper.pid}\n")
            if argv[1] == "ppo":
                argv += ["--timesteps", "32", "--force", *TINY]
            assert main(argv) == 0, capsys.readouterr().err
        assert _steps_of(os.path.join(run, "model.zip")) == 32  # --force started the run over
        assert sleeper.poll() is None and not _leftovers(run)
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(
    "old, new, needles",
    [
        ("algo: ppo", "algo: dqn", ["algo 'dqn'", "model_64_steps.zip is a ppo checkpoint", "algo: ppo"]),
        ("algo: ppo", "algo: a2c", ["algo 'a2c'", "is a ppo checkpoint"]),
        ("n_envs: 1\n", "n_envs: abc\n", ["config.yaml: n_envs: 'abc' is not an integer"]),
        ("env_id: RetroKit/Pong-v0", "env_id: RetroKit/Pongg-v0", ["config.yaml: env_id: unknown env"]),
        ("hyperparams:", "hyperparameters_of_old:", ["config.yaml: hyperparams: missing"]),
        ("env_kwargs: {}", "env_kwargs: {frame_stack: 2}", ["observations (4, 84, 84)", "(2, 84, 84)"]),
        ("network: nature", "network: resnet", ["config.yaml: network: unknown network 'resnet'; choose"]),
        ("network: nature", "network: [nature]", ["network: ['nature'] is not a name; restore it"]),
    ],
)
def test_resume_of_a_hand_edited_config_writes_nothing(run_copy, capsys, old, new, needles, snapshot):
    run = run_copy
    path = os.path.join(run, "config.yaml")
    text = open(path).read()
    assert old in text
    with open(path, "w") as fh:
        fh.write(text.replace(old, new))
    before = snapshot(run)
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "500"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("retrokit: error:"), err
    for needle in needles:
        assert needle in err, err
    assert snapshot(run) == before  # not even --timesteps went into config.yaml


def test_a_damaged_progress_part_does_not_make_the_run_unresumable(run_copy, capsys):
    # what two resumes writing one part file at once used to leave: rows of both interleaved
    run = run_copy
    os.makedirs(os.path.join(run, "monitor", "resume-1"))
    with open(os.path.join(run, "progress.part1.csv"), "w") as fh:
        fh.write("time/total_timesteps,train/loss\n96,0.5\n96,0.5,time/total_timesteps,train/loss\n1")
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "96"]) == 0
    out = capsys.readouterr().out
    assert "left out 2 damaged lines" in out and "orphaned-1" in out
    assert _totals(run)[-1] == 96 and _steps_of(os.path.join(run, "model.zip")) == 96


@pytest.mark.parametrize("named", ["a third", "empty"])
def test_resume_removes_what_a_kill_mid_save_left_and_starts_from_the_last_complete(run_copy, capsys, named):
    run = run_copy
    ckpts = os.path.join(run, "checkpoints")
    good = os.path.join(ckpts, "model_64_steps.zip")
    with open(good, "rb") as fh:
        data = fh.read()
    # SIGKILL while SB3 wrote the next checkpoint: the temporary of the atomic write, cut short
    cut_temporary = os.path.join(ckpts, ".model_96_steps.tmp-999999.zip")
    with open(cut_temporary, "wb") as fh:
        fh.write(data[: len(data) // 2])
    # ... while RLlib wrote one: a temporary directory
    cut_directory = os.path.join(ckpts, ".model_128_steps.tmp-999998")
    os.makedirs(os.path.join(cut_directory, "learner_group"))
    # a named checkpoint that never got all its data (a power loss right after the rename): newer than 64
    cut_named = os.path.join(ckpts, "model_96_steps.zip")
    with open(cut_named, "wb") as fh:
        fh.write(data[: len(data) // 3] if named == "a third" else b"")
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "96"]) == 0
    out = capsys.readouterr().out
    for path in (cut_temporary, cut_directory, cut_named):
        assert f"removed {path}: " in out, out
    assert f"resuming from {good} (64 steps)" in out
    assert _steps_of(cut_named) == 96 and _steps_of(os.path.join(run, "model.zip")) == 96  # written anew
    assert not _leftovers(run)


def test_resume_removes_nothing_named_when_no_checkpoint_is_complete(run_copy, capsys, snapshot):
    run = run_copy
    for _, path in list_checkpoints(run):
        with open(path, "r+b") as fh:
            fh.truncate(100)
    before = snapshot(run)
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "96"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot read checkpoint" in err, err
    assert snapshot(run) == before


def test_model_zip_survives_a_damaged_last_checkpoint(tiny_run, run_copy):
    final, (steps, last) = os.path.join(tiny_run, "model.zip"), list_checkpoints(tiny_run)[-1]
    assert not os.path.samefile(final, last)  # two files (a copy of the run could not tell a hard link)
    run = run_copy
    steps, last = list_checkpoints(run)[-1]
    with open(last, "r+b") as fh:  # damaged in place, e.g. by a disk error: model.zip is another file
        fh.write(b"\0" * 64)
    assert _steps_of(os.path.join(run, "model.zip")) == steps == 64


def _rllib_run_with_config_edit(tmp_path, old: str, new: str) -> str:
    """A resumable copy of the committed RLlib run (its final policy as the checkpoint) whose config.yaml
    has ``old`` replaced by ``new``."""
    results = os.path.join(os.path.dirname(__file__), "..", "..", "results", "pong-rllib-ppo-0")
    run = str(tmp_path / "run")
    shutil.copytree(results, run)
    shutil.copytree(os.path.join(run, "model"), os.path.join(run, "checkpoints", "model_2000000_steps"))
    path = os.path.join(run, "config.yaml")
    with open(path) as fh:
        text = fh.read()
    assert old in text
    with open(path, "w") as fh:
        fh.write(text.replace(old, new))
    return run


@pytest.mark.parametrize("network", ["resnet", "[nature]"])
def test_rllib_resume_checks_the_network_as_every_engine_does(tmp_path, capsys, network, snapshot):
    run = _rllib_run_with_config_edit(tmp_path, "\nnetwork: nature\n", f"\nnetwork: {network}\n")
    before = snapshot(run)
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "3e6"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    if network == "[nature]":  # a list where a name belongs: said when config.yaml is read, for every engine
        assert "config.yaml: network: ['nature'] is not a name; restore it" in err, err
    else:
        assert f"config.yaml: network: unknown network {network!r}; choose one of nature, impala" in err, err
    assert snapshot(run) == before


def test_rllib_resume_names_an_algo_that_does_not_match_the_checkpoint(tmp_path, capsys, snapshot):
    run = _rllib_run_with_config_edit(tmp_path, "\nalgo: ppo\n", "\nalgo: appo\n")
    before = snapshot(run)
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "3e6"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "algo 'appo'" in err and "is a ppo checkpoint" in err, err
    assert snapshot(run) == before


def _descendants(pid: int) -> list[tuple[int, int, str]]:
    """``(pid, parent pid, command line)`` of every process below ``pid``, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            table[int(entry)] = (ppid, cmd)
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, cmd) in table.items():
            if ppid == parent:
                found.append((child, ppid, cmd))
                frontier.append(child)
    return found


def _env_workers(pid: int) -> list[int]:
    """The env worker processes of the run ``pid``: the children of its forkserver (or, with fork, its
    children but the resource tracker)."""
    below = _descendants(pid)
    servers = {child for child, ppid, cmd in below if "forkserver" in cmd and ppid == pid}
    if servers:
        return [child for child, ppid, _ in below if ppid in servers]
    return [child for child, ppid, cmd in below if ppid == pid and "resource_tracker" not in cmd]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the env workers through /proc")
def test_an_env_worker_killed_during_training_saves_names_it_and_resumes(tmp_path):
    run = str(tmp_path / "run")
    cmd = [*CLI, "train", "ppo", ENV, "--timesteps", "1e6", "--run-dir", run, "--backend", "subprocess",
           "--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32",
           "--checkpoint-every", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not os.path.exists(os.path.join(run, "progress.csv")) or len(_totals(run)) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)  # training is under way once PPO logged two rollouts
        workers = _env_workers(proc.pid)
        assert len(workers) == 2, _descendants(proc.pid)
        os.kill(workers[1], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, (out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("retrokit: error: "), err
    steps, path = list_checkpoints(run)[-1]
    assert errors[0] == (
        f"retrokit: error: env rank 1 ({ENV}): its worker process (pid {workers[1]}) died: killed by SIGKILL "
        f"(signal 9); training stopped at {steps} steps, checkpoint {path}; resume with: retrokit train "
        f"--resume {run}"
    )
    assert _steps_of(path) == steps >= 64 and not _leftovers(run)
    assert main(["train", "--resume", run, "--timesteps", str(steps + 64)]) == 0
    assert _steps_of(os.path.join(run, "model.zip")) == steps + 64
    assert _totals(run)[-1] == steps + 64
