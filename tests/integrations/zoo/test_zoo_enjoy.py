"""rl-zoo3's ``enjoy`` runs on kit envs in the README install (``pip install -e ".[dev,contrib,zoo]"``)."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import pytest

import retro_atari_kit  # noqa: F401

pytestmark = pytest.mark.slow

# rl_zoo3 (the zoo extra) runs in subprocesses only: importing it here would replace gymnasium's TimeLimit
# for the whole test process. Without the extra the subprocess fails and names the missing module.


def test_zoo_extra_declares_what_enjoy_and_record_import():
    # rl_zoo3.enjoy and .record_video import rl_zoo3.load_from_hub, which imports `requests` undeclared
    from importlib.metadata import requires

    zoo = [r.split(";")[0].strip() for r in requires("retro-atari-kit") or [] if 'extra == "zoo"' in r]
    assert "requests" in zoo and any(r.startswith("rl_zoo3") for r in zoo)


def test_rl_zoo3_enjoy_plays_a_saved_model(tmp_path):
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


@pytest.mark.parametrize("env_id", ["RetroKit/Pong-v0", "RetroKit/Pong-Atari2600-v0"])
def test_rl_zoo3_enjoy_renders_in_a_window(tmp_path, env_id):
    # enjoy without --no-render: the zoo makes the env with render_mode="human" and calls
    # VecEnv.render("human") every step; SDL's dummy driver stands in for a display
    from stable_baselines3 import PPO

    name = env_id.replace("/", "-")
    env = gym.make(env_id)
    run = tmp_path / "ppo" / f"{name}_1"
    run.mkdir(parents=True)
    PPO("CnnPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu").save(run / f"{name}.zip")
    env.close()
    args = f"--algo ppo --env {env_id} --gym-packages retro_atari_kit --exp-id 1 -n 20"
    cmd = [sys.executable, "-m", "rl_zoo3.enjoy", *args.split(), "-f", str(tmp_path), "--device", "cpu"]
    environ = {**os.environ, "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=environ)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Loading {run / (name + '.zip')}" in proc.stdout
    assert "tried to render" not in proc.stderr  # SB3's warning when the env cannot render "human"
    assert "A.L.E: Arcade Learning Environment" not in proc.stderr  # the banner is off from the Python API
