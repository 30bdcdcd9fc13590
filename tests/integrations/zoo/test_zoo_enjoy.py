"""rl-zoo3's ``enjoy`` runs on kit envs in the README install (``pip install -e ".[dev,contrib,zoo]"``)."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

import retro_atari_kit  # noqa: F401


def test_zoo_extra_declares_what_enjoy_and_record_import():
    # rl_zoo3.enjoy and .record_video import rl_zoo3.load_from_hub, which imports `requests` undeclared
    from importlib.metadata import requires

    zoo = [r.split(";")[0].strip() for r in requires("retro-atari-kit") or [] if 'extra == "zoo"' in r]
    assert "requests" in zoo and any(r.startswith("rl_zoo3") for r in zoo)


def test_rl_zoo3_enjoy_plays_a_saved_model(tmp_path):
    pytest.importorskip("rl_zoo3", reason="the zoo extra")
    from stable_baselines3 import PPO

    # an untrained model in the zoo's layout: <folder>/<algo>/<env name>_<exp id>/<env name>.zip
    env = gym.make("RetroKit/Pong-v0")
    run = tmp_path / "ppo" / "RetroKit-Pong-v0_1"
    run.mkdir(parents=True)
    PPO("CnnPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu").save(run / "RetroKit-Pong-v0.zip")
    env.close()
    args = "--algo ppo --env RetroKit/Pong-v0 --gym-packages retro_atari_kit --exp-id 1 -n 50 --no-render"
    cmd = [sys.executable, "-m", "rl_zoo3.enjoy", *args.split(), "-f", str(tmp_path), "--device", "cpu"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Loading {run / 'RetroKit-Pong-v0.zip'}" in proc.stdout
