"""Parallel play starts only where it pays: a CUDA learner. On a CPU learner ``pong-dqn-fast`` trains as
plain synchronous DQN with the same schedule, says so in one line, and starts no play process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
import torch
import yaml
from retro_atari_kit.integrations.sb3.parallel_play import parse_options, play_pays

PONG = "RetroKit/Pong-v0"


def test_play_pays_only_for_a_cuda_learner_unless_always():
    assert not play_pays({"ahead": None}, "cpu")
    assert play_pays({"ahead": None}, "cuda") and play_pays(True, "cuda:0")
    assert play_pays(True, "auto") == torch.cuda.is_available()
    assert play_pays({"when": "always"}, "cpu")
    assert not play_pays(None, "cuda") and not play_pays(False, "cuda")
    assert parse_options(True)["when"] == "cuda"
    with pytest.raises(ValueError, match="parallel_play.when must be cuda or always"):
        parse_options({"when": "gpu"})


def _players(proc: psutil.Process) -> list[str]:
    """Command lines of the multiprocessing children the trainer started (the play process is one)."""
    found = []
    for child in proc.children(recursive=True):
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if ("spawn_main" in line or "forkserver" in line) and "resource_tracker" not in line:
            found.append(line)
    return found


def test_pong_dqn_fast_on_a_cpu_learner_trains_synchronously_without_a_play_process(tmp_path):
    run = str(tmp_path / "run")
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "retrokit"),
        "train", "dqn", PONG, "--preset", "pong-dqn-fast", "--device", "cpu", "--timesteps", "400",
        "--set", "learning_starts=100", "--set", "buffer_size=3000", "--checkpoint-every", "0",
        "--run-dir", run,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    seen: list[str] = []
    try:
        trainer = psutil.Process(proc.pid)
        while proc.poll() is None:  # the play process would live from the first step to the last
            seen += _players(trainer)
            time.sleep(0.05)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert not seen, seen
    notes = [line for line in out.splitlines() if line.startswith("parallel_play: off")]
    assert len(notes) == 1 and "train_freq 4, batch 128" in notes[0], out
    config = yaml.safe_load(open(os.path.join(run, "config.yaml")))
    hp = config["hyperparams"]
    assert hp["train_freq"] == 4 and hp["batch_size"] == 128 and hp["parallel_play"]["when"] == "cuda"
    assert "done: 400 steps" in out
