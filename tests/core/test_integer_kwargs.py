"""numpy integers are integers wherever the kit's public API takes an int (bools never are), and
``RETROKIT_ADAPTERS`` with a value that is neither on nor off warns once naming the accepted values.

Real envs, vector envs, models and buffers; the env variable is read by a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import retro_atari_kit  # noqa: F401  (registers the RetroKit/ IDs)
from retro_atari_kit.errors import as_int
from retro_atari_kit.models import ImpalaCNN, NatureCNN


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3), np.array(3)])
def test_as_int_takes_every_integer(value):
    assert as_int(value) == 3 and type(as_int(value)) is int


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 3.0, np.float64(3), "3", None, np.array([3])])
def test_as_int_refuses_what_is_not_an_integer(value):
    assert as_int(value) is None


def test_env_kwargs_take_numpy_integers_and_still_refuse_bools():
    env = gym.make(
        "RetroKit/Pong-v0", frame_skip=np.int64(4), frame_stack=np.int32(2), screen_size=np.uint8(64)
    )
    try:
        obs, _ = env.reset(seed=np.int64(0))
        assert obs.shape == (2, 64, 64)
    finally:
        env.close()
    with pytest.raises(TypeError, match="frame_skip must be an int >= 1, got True"):
        gym.make("RetroKit/Pong-v0", frame_skip=True)
    env = gym.make("RetroKit/Pong-v0", crop_score=(np.int64(14), 196, 0, 160), sticky_actions=np.float32(0))
    env.close()


def test_vector_counts_take_numpy_integers():
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=np.int64(2), shards=np.int64(1), frame_stack=np.int64(3))
    try:
        assert venv.num_envs == 2 and type(venv.num_envs) is int
        assert venv.reset(seed=0)[0].shape == (2, 3, 84, 84)
    finally:
        venv.close()
    with pytest.raises(ValueError, match="num_envs must be an int >= 1, got np.True_"):
        gym.make_vec("RetroKit/Pong-v0", num_envs=np.bool_(True))


def test_models_take_numpy_integers():
    assert NatureCNN(in_channels=np.int64(4), features_dim=np.int32(16)).features_dim == 16
    impala = ImpalaCNN(depths=np.array([8, 16]), blocks_per_stage=np.int64(1), image_size=np.int64(64))
    assert impala.depths == (8, 16) and all(type(d) is int for d in impala.depths)
    with pytest.raises(ValueError, match="in_channels must be a positive int"):
        NatureCNN(in_channels=True)


def test_sb3_launcher_and_buffer_take_numpy_integers():
    from retro_atari_kit.integrations.sb3 import CompactReplayBuffer, make_vec_env

    venv = make_vec_env("RetroKit/Pong-v0", n_envs=np.int64(2), backend="inprocess")
    try:
        assert venv.num_envs == 2
        buffer = CompactReplayBuffer(
            64, venv.observation_space, venv.action_space, device="cpu", n_envs=2, n_steps=np.int64(3)
        )
        assert buffer.n_steps == 3 and type(buffer.n_steps) is int
    finally:
        venv.close()


def test_ranges_judge_numpy_numbers_as_the_numbers_they_are():
    from retro_atari_kit.errors import RunError
    from retro_atari_kit.presets.ranges import check_range

    with pytest.raises(RunError, match="n_steps must be >= 1"):
        check_range("n_steps", np.int64(0))  # was taken as "not a number" and let through
    with pytest.raises(RunError, match=r"gamma must be in \(0, 1\]"):
        check_range("gamma", np.float32(2))
    check_range("n_steps", np.int64(128))


def _import_with(value: str) -> subprocess.CompletedProcess:
    code = "import retro_atari_kit\nprint(retro_atari_kit.adapters_enabled())\n"
    env = {**os.environ, "RETROKIT_ADAPTERS": value}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("value", ["2", "maybe"])
def test_retrokit_adapters_neither_on_nor_off_warns_once(value):
    out = _import_with(value)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"  # the default stays
    lines = [line for line in out.stderr.splitlines() if "RETROKIT_ADAPTERS" in line]
    assert len(lines) == 1, out.stderr
    assert f"RETROKIT_ADAPTERS={value!r} is neither on nor off" in lines[0]
    assert "0, false, no, off" in lines[0] and "1, true, yes, on" in lines[0]


@pytest.mark.parametrize(
    ("value", "enabled"), [("OFF", "False"), (" no ", "False"), ("Yes", "True"), ("", "True")]
)
def test_retrokit_adapters_accepted_values_say_nothing(value, enabled):
    out = _import_with(value)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == enabled
    assert "RETROKIT_ADAPTERS" not in out.stderr
