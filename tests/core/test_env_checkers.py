"""Every kind of RetroKit/ ID passes gymnasium's and SB3's env checkers unmodified (no skip flags), and the
metadata declares only the render modes that work (None, "rgb_array", "human")."""

import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import retro_atari_kit  # noqa: F401

# gymnasium's checker opens the "human" window: SDL's dummy driver, whatever the machine has (the last
# test sets no driver at all, in a subprocess)
pytestmark = pytest.mark.usefixtures("sdl_dummy_driver")

ALE_IDS = ["RetroKit/Pong-v0", "RetroKit/Breakout-v0", "RetroKit/Seaquest-v0", "RetroKit/MsPacman-v0"]
RETRO_IDS = ["RetroKit/Airstriker-Genesis-v0", "RetroKit/Pong-Atari2600-v0"]


def _unexpected(caught):
    # gymnasium always notes that a gym.make env is wrapped (the stack *is* the env); nothing else may warn
    return [str(w.message) for w in caught if "different from the unwrapped" not in str(w.message)]


@pytest.mark.parametrize("env_id", ALE_IDS + RETRO_IDS)
def test_gymnasium_check_env_passes_unmodified(env_id):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id)
        try:
            # tries every declared render mode and makes further envs while this one is open
            gym_check_env(env)
        finally:
            env.close()
        env = gym.make(env_id, render_mode="rgb_array")
        try:
            gym_check_env(env)
        finally:
            env.close()
    assert _unexpected(caught) == []


@pytest.mark.parametrize("env_id", ["RetroKit/Pong-v0", "RetroKit/Airstriker-Genesis-v0"])
@pytest.mark.parametrize("render_mode", [None, "human"])
def test_gymnasium_check_env_passes_on_the_unwrapped_emulator_and_the_window(env_id, render_mode):
    # what gymnasium's "different from the unwrapped version" warning tells users to run: the bare emulator
    # declares "human", so the checker makes the kit env with the window from the spec
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id, render_mode=render_mode)
        try:
            gym_check_env(env.unwrapped)
            gym_check_env(env)  # warns that the env is wrapped; must not raise
        finally:
            env.close()
    assert _unexpected(caught) == []


@pytest.mark.parametrize("env_id", RETRO_IDS)
def test_sb3_check_env_passes_on_in_process_and_worker_hosted_retro_envs(env_id):
    # (SB3's checker on ALE IDs: tests/core/test_ale_env.py)
    from retro_atari_kit.envs.retro_worker import RetroWorkerEnv

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = gym.make(env_id)
        try:
            second = gym.make(env_id)  # this process already has an emulator: hosted by a worker
            try:
                assert isinstance(second.unwrapped, RetroWorkerEnv)
                # SB3's defaults; its opt-in render check closes the env and then steps it, which no env
                # that frees its emulator on close() can pass
                sb3_check_env(first)
                sb3_check_env(second)
            finally:
                second.close()
        finally:
            first.close()
    assert _unexpected(caught) == []


@pytest.mark.parametrize("env_id", ["RetroKit/Pong-v0", "RetroKit/Pong-Atari2600-v0"])
def test_metadata_declares_the_modes_that_work(env_id):
    env = gym.make(env_id, render_mode="rgb_array")
    try:
        assert env.metadata["render_modes"] == ["human", "rgb_array"]  # and None, always
        assert env.metadata["render_fps"] == 15.0  # 60 emulator frames/s, one render per 4-frame step
        env.reset(seed=0)
        frame = env.render()
        assert frame.dtype == np.uint8 and frame.shape == (210, 160, 3)
    finally:
        env.close()
    env = gym.make(env_id, frame_skip=2)
    try:
        assert env.metadata["render_fps"] == 30.0
    finally:
        env.close()


def test_both_checkers_pass_with_no_display_and_no_sdl_variable(tmp_path):
    # the machine users have (a server, CI, a notebook): a subprocess with no DISPLAY, no WAYLAND_DISPLAY and
    # no SDL_* variable at all (this module's fixture set SDL's dummy driver in this process; the suite sets
    # none), which checks its own environment before importing anything that could set one
    IDS = ["RetroKit/Pong-v0", "RetroKit/Airstriker-Genesis-v0"]  # an ALE and a stable-retro stack
    script = tmp_path / "check.py"
    script.write_text(
        "import os\n"
        "if __name__ == '__main__':  # (a retro worker re-imports this file, after the kit chose a driver)\n"
        "    shown = [k for k in os.environ if k in ('DISPLAY', 'WAYLAND_DISPLAY') or k.startswith('SDL_')]\n"
        "    assert shown == [], shown\n"
        "import gymnasium as gym, retro_atari_kit\n"
        "from gymnasium.utils.env_checker import check_env\n"
        "from stable_baselines3.common.env_checker import check_env as sb3_check_env\n"
        "if __name__ == '__main__':\n"
        f"    for env_id in {IDS!r}:\n"
        "        env = gym.make(env_id)\n"
        "        check_env(env)  # makes the env again in every declared mode, 'human' included\n"
        "        sb3_check_env(env)\n"
        "        env.close()\n"
        "        print('passed', env_id)\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY") and not k.startswith("SDL_")
    }
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [word for env_id in IDS for word in ("passed", env_id)]
    assert "Traceback" not in proc.stderr and "WindowUnavailableError" not in proc.stderr
    # the kit found no display and said so once, then drew with SDL's dummy driver
    assert sum("NoDisplayWarning" in line for line in proc.stderr.splitlines()) == 1
