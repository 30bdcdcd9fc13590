"""``retrokit train ... --engine rllib`` end to end, in subprocesses as a user runs it (real Ray, real ALE):
train APPO, stop it with Ctrl-C (a checkpoint is saved, exit 0), resume it to a larger total, then
``retrokit eval``, ``record`` and ``plot`` read the RLlib run dir like an SB3 one."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray", reason="Ray RLlib not installed: pip install 'retro-atari-kit[rllib]'")

from retro_atari_kit.runs import list_checkpoints, load_config  # noqa: E402

ENV = "RetroKit/Pong-v0"
SMALL = [
    "--engine", "rllib", "--num-env-runners", "1", "--envs-per-runner", "2",
    "--set", "train_batch_size_per_learner=32", "--set", "rollout_fragment_length=16",
    "--set", "min_time_s_per_iteration=1", "--checkpoint-every", "0",
]  # fmt: skip


def retrokit(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "retro_atari_kit.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs,
    )  # fmt: skip


def progress_rows(run: str) -> list[dict]:
    path = os.path.join(run, "progress.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.timeout(420)
def test_train_ctrl_c_resume_eval_plot(tmp_path):
    run = str(tmp_path / "run")
    proc = retrokit("train", "appo", ENV, "--timesteps", "1e6", "--run-dir", run, *SMALL)
    try:
        deadline = time.time() + 180
        sampled = lambda: [r for r in progress_rows(run) if float(r["time/total_timesteps"]) > 0]  # noqa: E731
        while not sampled() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        proc.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the foreground process
        output = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-3000:]
    assert "interrupted at" in output and f"retrokit train --resume {run}" in output
    config = load_config(run)
    assert config["engine"] == "rllib" and config["algo"] == "appo"
    assert config["hyperparameters"]["train_batch_size_per_learner"] == 32
    (stopped_at, ckpt), *_ = list_checkpoints(run)[::-1]
    assert stopped_at > 0 and os.path.isfile(os.path.join(ckpt, "policy.pt"))
    assert not os.path.exists(os.path.join(run, "model")), "an interrupted run has no final model"
    assert os.path.isfile(os.path.join(run, "monitor", "0.monitor.csv"))
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(run))

    total = stopped_at + 64
    resumed = retrokit("train", "--resume", run, "--timesteps", str(total))
    output = resumed.communicate(timeout=240)[0]
    assert resumed.returncode == 0, output[-3000:]
    steps = [int(float(r["time/total_timesteps"])) for r in progress_rows(run)]
    assert steps == sorted(steps) and steps[-1] >= total and min(steps) < stopped_at
    assert not any(name.startswith("progress.part") for name in os.listdir(run)), "parts merged"
    assert os.path.isdir(os.path.join(run, "monitor", "resume-1"))
    final_steps, final_ckpt = list_checkpoints(run)[-1]
    assert final_steps >= total
    # the final model: an independent copy of the last checkpoint's policy
    assert not os.path.islink(os.path.join(run, "model"))
    with open(os.path.join(run, "model", "policy.pt"), "rb") as a, open(f"{final_ckpt}/policy.pt", "rb") as b:
        assert a.read() == b.read()

    evaluated = retrokit("eval", run, "--episodes", "1", "--json")
    output = evaluated.communicate(timeout=240)[0]
    assert evaluated.returncode == 0, output[-3000:]
    line = next(x for x in output.splitlines() if x.startswith("{"))
    assert f'"steps": {final_steps}' in line and '"episodes": 1' in line
    # a whole game of Pong: one side reaches 21, so the true score is never 0
    score = json.loads(line)["scores"][0]
    assert -21 <= score <= 21 and score != 0

    recorded = retrokit("record", run, "--out", str(tmp_path / "agent.gif"), "--max-steps", "30")
    output = recorded.communicate(timeout=120)[0]
    assert recorded.returncode == 0, output[-3000:]
    assert os.path.getsize(tmp_path / "agent.gif") > 1000

    plotted = retrokit("plot", run, "--out", str(tmp_path / "curves.png"))
    output = plotted.communicate(timeout=120)[0]
    assert plotted.returncode == 0, output[-3000:]
    assert os.path.getsize(tmp_path / "curves.png") > 1000


def test_rllib_options_need_the_rllib_engine(capsys):
    from retro_atari_kit.cli import main

    assert main(["train", "ppo", ENV, "--num-env-runners", "2"]) == 2
    assert "--num-env-runners needs --engine rllib" in capsys.readouterr().err


def test_unreachable_address_is_one_line(tmp_path, capsys):
    from retro_atari_kit.cli import main

    run = str(tmp_path / "r")
    code = main(["train", "ppo", ENV, "--engine", "rllib", "--address", "127.0.0.1:9", "--run-dir", run])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "cannot reach a Ray head at 127.0.0.1:9" in err and "ray start --head" in err
    assert not os.path.exists(run), "nothing is written before the address is known to work"


def test_without_ray_one_line_names_the_extra(tmp_path):
    # a Python where `import ray` fails (None in sys.modules blocks the import, as if Ray were not installed)
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from retro_atari_kit.cli import main\n"
        f"sys.exit(main(['train', 'appo', '{ENV}', '--engine', 'rllib', '--run-dir', r'{tmp_path / 'r'}']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    err = [line for line in proc.stderr.splitlines() if line.startswith("retrokit")]
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-2000:]
    assert 'pip install "retro-atari-kit[rllib]"' in err[0]
    assert not (tmp_path / "r").exists()
