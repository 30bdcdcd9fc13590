"""A stop during a periodic evaluation (``--eval-every``) takes effect at once, as during training.

Whole games take minutes to evaluate here (a Pong game is ~800-1,800 agent steps): a Ctrl-C or a scheduler's
SIGTERM must not wait for them. Real processes, real signals, real training: the command is started in its
own process group with an evaluation far too long to finish, the group is signalled once the evaluation has
begun, and the test checks: exit 0 soon after, the usual stop lines, the stop checkpoint at the step the
evaluation began, no evaluation logged for the part played, no process of the group left, and a
``--resume`` whose next evaluation comes at the next multiple of ``--eval-every``. (``--engine rllib``
refuses ``--eval-every``: it has no periodic evaluation to stop.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from retro_atari_kit.evaluation import EvaluationStopped, evaluate_model
from retro_atari_kit.evaluation.play import evaluate_model_vector
from retro_atari_kit.registration import make_env
from retro_atari_kit.runs import list_checkpoints

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "retro_atari_kit.cli"]
ENV = "RetroKit/Pong-v0"
RETRO_ENV = "RetroKit/Airstriker-Genesis-v0"
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
EVERY, GAMES = 64, 200  # 200 games: far more than the bound below allows, on any machine
PPO = [
    "--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32",
    "--eval-every", str(EVERY), "--eval-episodes", str(GAMES), "--timesteps", "1e6",
]  # fmt: skip
# seconds from the signal to the command's exit: the stop checkpoint, closing the envs, the interpreter's
# exit. A correctness bound (finishing the evaluation takes minutes), generous for a loaded 2-core machine.
BOUND = 20.0


class RandomPlayer:
    """A model with SB3's ``predict``: random actions (no spaces named, so any env fits)."""

    def __init__(self, n: int) -> None:
        self.rng, self.n = np.random.default_rng(0), n

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        return self.rng.integers(self.n, size=len(obs)), state


def descendants() -> set[int]:
    """Live processes started by this one, or by those (the forkserver's workers are its grandchildren)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if fields[0] != "Z":
                parents[int(name)] = int(fields[1])
    found, new = set(), {os.getpid()}
    while new:
        new = {pid for pid, parent in parents.items() if parent in new} - found
        found |= new
    return found


def test_the_evaluation_loop_stops_between_steps_and_closes_its_envs():
    # this process holds a stable-retro emulator, so the evaluation's env runs in a retro worker process:
    # a stop ends the loop at the next step, with the games that had ended, and the worker is closed
    first = make_env(RETRO_ENV)
    try:
        make_env(RETRO_ENV).close()  # a first worker starts the start method's helpers, which stay
        helpers = descendants()
        asked = []

        def should_stop() -> bool:
            asked.append(descendants() - helpers)
            return len(asked) > 50

        with pytest.raises(EvaluationStopped) as stopped:
            evaluate_model(
                RandomPlayer(first.action_space.n), RETRO_ENV, episodes=100, should_stop=should_stop
            )
        assert stopped.value.scores == [] and stopped.value.episodes == 100
        assert len(asked) == 51 and len(asked[-1]) == 1  # asked before every step; its worker was serving
        deadline = time.monotonic() + 30
        while descendants() - helpers and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not descendants() & asked[-1], "the evaluation's env worker outlived it"
    finally:
        first.close()


def test_the_vector_evaluation_stops_between_steps_and_closes_its_envs():
    # the native backend in this process: its emulator and warp threads end with the vector env
    before = {t.ident for t in threading.enumerate()}
    asked = []

    def should_stop() -> bool:
        asked.append(len(asked))
        return len(asked) > 30

    with pytest.raises(EvaluationStopped) as stopped:
        evaluate_model_vector(
            RandomPlayer(6), ENV, episodes=10, num_envs=2, should_stop=should_stop, shards=1
        )
    assert stopped.value.scores == [] and stopped.value.episodes == 10  # no Pong game ends in 30 steps
    assert len(asked) == 31
    assert not [t.name for t in threading.enumerate() if t.ident not in before]


def output(tmp_path) -> str:
    return "".join((tmp_path / name).read_text(errors="replace") for name in ("stdout.txt", "stderr.txt"))


def group_members(pgid: int) -> list[int]:
    """Live processes (not zombies) of process group ``pgid``."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(name))
    return pids


def stop_during_the_evaluation(tmp_path, run: str, sig: int, *argv: str) -> tuple[subprocess.Popen, float]:
    """Start the run in its own group, signal the group once its first evaluation has begun; returns the
    ended command and the seconds from the signal to its exit."""
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(
            [*CLI, "train", "ppo", ENV, *PPO, *argv, "--run-dir", run],
            stdout=out, stderr=err, start_new_session=True, env=CHILD_ENV,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 400
        while f"evaluating {GAMES} games at {EVERY} steps" not in output(tmp_path):
            assert proc.poll() is None, output(tmp_path)[-3000:]
            assert time.monotonic() < deadline, "the evaluation did not start in time"
            time.sleep(0.1)
        time.sleep(1.0)  # well into the evaluation's first games
        os.killpg(proc.pid, sig)
        sent = time.monotonic()
        proc.wait(timeout=300)
        return proc, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize(
    ("sig", "backend"),
    [
        pytest.param(signal.SIGINT, "native", id="sigint-native"),
        pytest.param(signal.SIGTERM, "subprocess", id="sigterm-subprocess"),
    ],
)
def test_a_stop_during_an_evaluation_saves_at_once_and_resumes(tmp_path, sig, backend):
    run = str(tmp_path / "run")
    proc, elapsed = stop_during_the_evaluation(tmp_path, run, sig, "--backend", backend)
    text = output(tmp_path)
    assert proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert elapsed < BOUND, f"the stop took {elapsed:.1f} s: it waited for the evaluation\n{text[-2000:]}"
    # the evaluation was cut short and not logged as if complete
    assert f"evaluation at {EVERY} steps stopped after" in text, text[-3000:]
    assert not os.path.exists(os.path.join(run, "evaluations.csv"))
    with open(os.path.join(run, "log.txt")) as fh:
        assert "eval/" not in fh.read()
    # the stop checkpoint: the model as it was when the evaluation began
    steps, path = list_checkpoints(run)[-1]
    assert steps == EVERY
    assert f"interrupted at {steps} steps; checkpoint {path}" in text, text[-3000:]
    assert f"resume with: retrokit train --resume {run}" in text
    assert not os.path.exists(os.path.join(run, ".train.pid"))
    deadline = time.monotonic() + 60
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not group_members(proc.pid), f"processes outlived the command: {group_members(proc.pid)}"

    # resumed, the next evaluation is at the next multiple of --eval-every (2 games: config.yaml edited by
    # hand, as a user may), played whole and logged once
    config = os.path.join(run, "config.yaml")
    with open(config) as fh:
        text = fh.read()
    assert f"eval_episodes: {GAMES}\n" in text
    with open(config, "w") as fh:
        fh.write(text.replace(f"eval_episodes: {GAMES}\n", "eval_episodes: 2\n"))
    resumed = subprocess.run(
        [*CLI, "train", "--resume", run, "--timesteps", str(2 * EVERY)],
        capture_output=True, text=True, env=CHILD_ENV, timeout=400,
    )  # fmt: skip
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert f"resuming from {path} ({steps} steps)" in resumed.stdout
    assert f"evaluation at {2 * EVERY} steps: mean true score" in resumed.stdout
    with open(os.path.join(run, "evaluations.csv")) as fh:
        rows = fh.read().splitlines()
    assert len(rows) == 2 and rows[1].startswith(f"{2 * EVERY},") and rows[1].endswith(",2"), rows
