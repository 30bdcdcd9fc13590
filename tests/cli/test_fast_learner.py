"""``retrokit train ppo --preset gpu`` (FastPPO, integrations/sb3/fast_ppo.py) end to end on CPU: a short
run writes the usual files with the learner's statistics, ``--resume`` continues it with the same learner,
and a fast learner named for another algorithm is one error line."""

from __future__ import annotations

import csv
import json
import os
import zipfile

import pytest
import yaml

from retro_atari_kit.cli import main

pytestmark = pytest.mark.slow

TINY = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "64"]


def _data(path: str) -> dict:
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read("data"))


@pytest.mark.timeout(300)
def test_a_gpu_preset_run_trains_saves_and_resumes(tmp_path, capsys):
    run = str(tmp_path / "fast")
    args = ["train", "ppo", "RetroKit/Pong-v0", "--preset", "gpu", "--run-dir", run, *TINY]
    assert main([*args, "--timesteps", "128"]) == 0
    out = capsys.readouterr().out
    # the kit's thread rule, or (OMP_NUM_THREADS set, as tests/conftest.py does for xdist workers) the
    # user's setting, named
    assert "torch threads: " in out
    assert ("while learning" in out) != ("set: the kit leaves torch alone" in out)
    # on a CPU: one line that the learner is the GPU's (and SB3's truncated-minibatch warning not raw)
    assert "note: this preset's learner is built for a CUDA GPU (compiled steps, CUDA graphs); on cpu" in out
    assert "You have specified a mini-batch size" not in out + capsys.readouterr().err
    for name in ("model.zip", "config.yaml", "progress.csv", "log.txt"):
        assert os.path.isfile(os.path.join(run, name)), name
    data = _data(os.path.join(run, "model.zip"))
    assert data["num_timesteps"] == 128 and data["compile"] == data["cuda_graphs"] == "auto"
    assert data["rollout_buffer_class"]["__module__"] == "retro_atari_kit.integrations.sb3.device_buffer"
    with open(os.path.join(run, "progress.csv")) as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["time/total_timesteps"]) for r in rows] == [64, 128]
    assert (
        rows[-1]["train/value_loss"] and float(rows[-1]["train/n_updates"]) == 4
    )  # 4 epochs (SB3 logs an update with the next rollout)

    assert main(["train", "--resume", run, "--timesteps", "192"]) == 0
    assert _data(os.path.join(run, "model.zip"))["num_timesteps"] == 192
    with open(os.path.join(run, "progress.csv")) as fh:
        steps = [int(r["time/total_timesteps"]) for r in csv.DictReader(fh)]
    assert steps == [64, 128, 192]  # the resumed segment merged after the first


def test_a_fast_learner_for_dqn_is_one_error_line(tmp_path, capsys):
    run = str(tmp_path / "dqn")
    args = ["train", "dqn", "RetroKit/Pong-v0", "--set", "fast_learner=true", "--run-dir", run]
    assert main([*args, "--timesteps", "64"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "retrokit: error: fast_learner: dqn has none (only ppo and a2c do); remove it"
    assert not os.path.exists(run)


@pytest.mark.timeout(300)
def test_an_ent_coef_schedule_is_followed_recorded_and_resumed(tmp_path):
    """0.02 held for half of --timesteps, then linear to 0: FastPPO logs the value of each update (SB3 logs
    an update with the next rollout), config.yaml records the schedule and a resumed run follows it over
    its new budget."""
    run = str(tmp_path / "ent")
    schedule = "ent_coef={schedule: linear, initial: 0.02, start_fraction: 0.5}"
    args = ["train", "ppo", "RetroKit/Pong-v0", "--set", "fast_learner=true", "--set", schedule]
    assert main([*args, "--run-dir", run, *TINY, "--timesteps", "256"]) == 0
    with open(os.path.join(run, "config.yaml")) as fh:
        assert yaml.safe_load(fh)["hyperparams"]["ent_coef"] == {
            "schedule": "linear",
            "initial": 0.02,
            "start_fraction": 0.5,
        }

    def logged() -> list[float]:
        with open(os.path.join(run, "progress.csv")) as fh:
            return [float(r["train/ent_coef"]) for r in csv.DictReader(fh) if r.get("train/ent_coef")]

    # updates at 3/4, 1/2 and 1/4 of the 256 steps left: 0.02, 0.02, then half way down
    assert logged() == pytest.approx([0.02, 0.02, 0.01])
    assert main(["train", "--resume", run, "--timesteps", "384"]) == 0
    # the update after 320 of 384 steps: 1/6 left, a third of the way from 0 to 0.02
    assert logged() == pytest.approx([0.02, 0.02, 0.01, 0.02 / 3])
