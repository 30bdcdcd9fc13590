"""What each RLlib env runner's ``gym.make_vec`` gets: the native backend stays in the runner's process."""

from __future__ import annotations

import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from retro_atari_kit.integrations.rllib.envs import configure_env, runner_env_kwargs


@pytest.mark.parametrize(
    ("env_id", "kwargs", "expected"),
    [
        ("RetroKit/Pong-v0", {}, {"shards": 1}),  # native: no worker processes under a runner
        ("RetroKit/Pong-v0", {"noop_max": 3, "start_method": "spawn"},
         {"noop_max": 3, "start_method": "spawn", "shards": 1}),
        ("RetroKit/Pong-v0", {"shards": 4}, {"shards": 4}),  # the user's choice stands
        ("RetroKit/Pong-v0", {"backend": "subprocess"}, {"backend": "subprocess"}),  # shards would be refused
        ("RetroKit/Pong-v0", {"render_mode": "rgb_array"}, {"render_mode": "rgb_array"}),  # auto: subprocess
        ("RetroKit/Airstriker-Genesis-v0", None, {}),  # stable-retro: subprocess
        ("RetroKit/Pong-v0", {"bogus": 1}, {"bogus": 1}),  # left for the runner's own clear error
    ],
)  # fmt: skip
def test_runner_env_kwargs_keep_the_native_backend_in_one_process(env_id, kwargs, expected):
    assert runner_env_kwargs("retro_atari_kit:" + env_id, kwargs) == expected


def test_configure_env_sets_the_runners_env_config():
    config = configure_env(PPOConfig(), "RetroKit/Breakout-v0", {"crop_score": True})
    assert config.env == "retro_atari_kit:RetroKit/Breakout-v0"
    assert config.env_config == {"crop_score": True, "shards": 1}
