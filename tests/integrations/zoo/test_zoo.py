"""rl-zoo3 trains with the kit's stack from ``retro_atari_kit.integrations.zoo`` (no second wrapper stack)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import gymnasium as gym
import pytest

import retro_atari_kit  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])
def test_hyperparams_cover_every_retrokit_id_without_wrappers(algo):
    hp = importlib.import_module(f"retro_atari_kit.integrations.zoo.{algo}").hyperparams
    ids = {k for k in gym.registry if k.startswith("RetroKit/")}
    assert ids and set(hp) >= ids
    for params in hp.values():
        assert params["policy"] == "CnnPolicy"
        assert "env_wrapper" not in params and "frame_stack" not in params
    # each ID gets its own dict (the zoo mutates what it reads)
    a, b = hp["RetroKit/Pong-v0"], hp["RetroKit/Breakout-v0"]
    assert a == b and a is not b


def test_rl_zoo3_trains_a_few_hundred_steps(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        "ppo",
        "--env",
        "RetroKit/Pong-v0",
        "--gym-packages",
        "retro_atari_kit",
        "--conf-file",
        "retro_atari_kit.integrations.zoo.ppo",
        "-n",
        "256",
        "--hyperparams",
        "n_envs:2",
        "n_steps:64",
        "batch_size:64",
        "-f",
        str(tmp_path),
        "--eval-freq",
        "-1",
        "--seed",
        "0",
        "--log-interval",
        "1",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Stacking" not in proc.stdout  # the zoo added no VecFrameStack
    run = tmp_path / "ppo" / "RetroKit-Pong-v0_1"
    from stable_baselines3 import PPO

    # the zoo's schedules are pickled rl_zoo3 functions: loading them would import rl_zoo3 into this process
    schedules = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    model = PPO.load(run / "RetroKit-Pong-v0.zip", custom_objects=schedules)
    assert model.num_timesteps == 256
    assert model.observation_space.shape == (4, 84, 84)  # the kit's stack, once
    assert sorted(os.listdir(run))[:2] == ["0.monitor.csv", "1.monitor.csv"]


def _zoo_train(tmp_path, algo: str, *extra: str) -> subprocess.CompletedProcess:
    """``python -m rl_zoo3.train`` on Pong as its docs show it, with no ``--conf-file``."""
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", "RetroKit/Pong-v0",
           "--gym-packages", "retro_atari_kit", "-n", "256", "-f", str(tmp_path), "--eval-freq", "-1",
           "--seed", "0", *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def test_rl_zoo3_without_conf_file_trains_with_the_kit_presets(tmp_path):
    proc = _zoo_train(tmp_path, "ppo", "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "retro-atari-kit: RetroKit/Pong-v0 is the kit's finished stack; hyperparameters from --conf-file "
        "retro_atari_kit.integrations.zoo.ppo (rl-zoo3's own ppo.yml would wrap it a second time)"
    ) in proc.stdout.splitlines()
    assert "Loading hyperparameters from: retro_atari_kit.integrations.zoo.ppo" in proc.stdout
    assert "Stacking" not in proc.stdout and "AtariWrapper" not in proc.stdout  # no second stack
    assert "stacks frames twice" not in proc.stderr
    run = tmp_path / "ppo" / "RetroKit-Pong-v0_1"
    saved = (run / "RetroKit-Pong-v0" / "config.yml").read_text()  # the hyperparameters the zoo used
    assert "env_wrapper" not in saved and "frame_stack" not in saved and "lin_2.5e-4" in saved
    assert (run / "RetroKit-Pong-v0.zip").is_file()


def test_rl_zoo3_without_conf_file_for_an_algo_the_kit_has_no_module_for_names_conf_file(tmp_path):
    import sb3_contrib  # noqa: F401  (rl-zoo3's qrdqn is sb3-contrib's: the contrib extra)

    proc = _zoo_train(tmp_path, "qrdqn")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("retro-atari-kit: RetroKit/Pong-v0 with --algo qrdqn:"), (
        lines
    )
    assert "pass --conf-file" in lines[0] and "qrdqn.yml" in lines[0]
    assert not (tmp_path / "qrdqn").exists()  # refused before anything was written
