"""``render_mode="human"``: the stack built with ``"rgb_array"`` shown in a pygame window (gymnasium's
HumanRendering), headless with SDL's dummy driver, and once on a real X display (Xvfb) with a screenshot."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pygame
import pytest

import retro_atari_kit  # noqa: F401

# the windows of this process draw with SDL's dummy driver (nothing is shown); the tests of a machine without
# a display and of a real X display (Xvfb) run in subprocesses with their own environment
pytestmark = pytest.mark.usefixtures("sdl_dummy_driver")

ALE_ID, RETRO_ID = "RetroKit/Pong-v0", "RetroKit/Pong-Atari2600-v0"


def _window_pixels(env: gym.Env) -> np.ndarray:
    """What the window shows, as an (H, W, 3) array."""
    return pygame.surfarray.array3d(env.get_wrapper_attr("window")).transpose(1, 0, 2)


def _play_in_window(env: gym.Env, steps: int = 8) -> None:
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps):
        env.step(env.action_space.sample())
    # the window shows the emulator's current frame, enlarged 2x (210 rows -> about 480 / 210 = 2)
    frame = env.unwrapped.render()
    assert frame.shape == (210, 160, 3)
    assert np.array_equal(_window_pixels(env), np.repeat(np.repeat(frame, 2, axis=0), 2, axis=1))
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) >= 3  # a game screen, not a blank one


@pytest.mark.parametrize("env_id", [ALE_ID, RETRO_ID])
def test_human_shows_every_step_in_a_window(env_id):
    env = gym.make(env_id, render_mode="human")
    try:
        assert env.render_mode == "human"
        assert env.metadata["render_modes"] == ["human", "rgb_array"]
        assert env.metadata["render_fps"] == 15.0  # real time: 60 emulator frames/s, 4 per agent step
        _play_in_window(env)
        assert env.get_wrapper_attr("clock") is not None
        assert env.render() is None  # gymnasium's contract for "human": frames go to the window
        assert env.observation_space.contains(env.step(0)[0])  # the agent still sees the usual stack
        assert pygame.display.get_caption()[0] == env_id
        # the window is the render mode, not a step of the stack: the spec rebuilds it from its kwargs
        assert [w.name for w in env.spec.additional_wrappers] == [
            w.name for w in gym.make(env_id).spec.additional_wrappers
        ]
        assert env.spec.kwargs["render_mode"] == "human"
    finally:
        env.close()
    assert not pygame.display.get_init()  # close() closed the window


def test_human_on_a_worker_hosted_retro_env_draws_in_this_process():
    from retro_atari_kit.envs.retro_worker import RetroWorkerEnv

    first = gym.make(RETRO_ID)  # holds this process's emulator: the next env runs in a worker
    try:
        env = gym.make(RETRO_ID, render_mode="human")
        try:
            assert isinstance(env.unwrapped, RetroWorkerEnv)
            assert env.unwrapped.render_mode == "rgb_array"  # the worker renders frames, opens no window
            _play_in_window(env)
        finally:
            env.close()
    finally:
        first.close()


def test_make_vec_refuses_human_with_one_line():
    with pytest.raises(ValueError) as info:
        gym.make_vec(ALE_ID, num_envs=2, render_mode="human")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{ALE_ID}: gym.make_vec does not take render_mode='human'")
    assert "gym.make(id, render_mode='human')" in message and "render_mode='rgb_array'" in message


@pytest.mark.parametrize("env_id", [ALE_ID, RETRO_ID])
def test_unknown_render_mode_names_the_three(env_id):
    with pytest.raises(ValueError, match=r"render_mode must be one of None, 'rgb_array', 'human' .*'ansi'"):
        gym.make(env_id, render_mode="ansi")


def _run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, env=env
    )


def _env_without_display() -> dict[str, str]:
    drop = ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER", "SDL_AUDIODRIVER")
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_without_pygame_one_line_says_install_it():
    code = """
        import sys
        sys.modules["pygame"] = None  # as if pygame were not installed: importing it raises ImportError
        import gymnasium as gym, retro_atari_kit
        gym.make("RetroKit/Pong-v0", render_mode="human")
    """
    proc = _run_python(code, _env_without_display())
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "retro_atari_kit.envs._render.WindowUnavailableError: RetroKit/Pong-v0: render_mode="
    )
    assert "pip install pygame" in last and "render_mode='rgb_array'" in last
    assert "During handling" not in proc.stderr  # no chained ImportError traceback


def test_without_a_display_one_warning_and_the_env_plays_on(tmp_path):
    # a server, CI, a notebook: no DISPLAY, no WAYLAND_DISPLAY, no SDL variable (retro needs a script file:
    # its second env starts a worker that re-imports the main script)
    script = tmp_path / "play.py"
    script.write_text(
        textwrap.dedent("""
            import gymnasium as gym, numpy as np, retro_atari_kit
            if __name__ == "__main__":
                for env_id in ("RetroKit/Pong-Atari2600-v0", "RetroKit/Pong-v0", "RetroKit/Pong-v0"):
                    env = gym.make(env_id, render_mode="human")
                    obs, _ = env.reset(seed=0)
                    for _ in range(8):
                        obs = env.step(1)[0]
                    assert env.render() is None and obs.shape == (4, 84, 84) and obs.any()
                    env.close()
                print("played")
        """)
    )
    env = {k: v for k, v in _env_without_display().items() if not k.startswith("SDL_")}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "played"
    warned = [line for line in proc.stderr.splitlines() if "NoDisplayWarning" in line]
    assert len(warned) == 1, proc.stderr  # once per process, however many "human" envs
    assert (
        "RetroKit/Pong-Atari2600-v0: render_mode='human' shows a window, but this machine has no display"
        in (warned[0])
    )
    assert "xvfb-run" in warned[0] and "render_mode='rgb_array'" in warned[0]
    assert "XDG_RUNTIME_DIR" not in proc.stderr and "ALSA" not in proc.stderr  # no SDL noise


# -- a real window on an X display ----------------------------------------------------------------------


def _read_xwd(path) -> np.ndarray:
    """The (H, W, 3) picture in an XWD file: Xvfb's frame buffer with ``-fbdir`` (a 32-bit TrueColor
    screen), i.e. a screenshot of the whole display."""
    data = open(path, "rb").read()
    header = struct.unpack(">25I", data[:100])  # XWD headers are big-endian
    size, version, _, _, width, height, _, byte_order, _, _, _, bpp, stride = header[:13]
    masks, ncolors = header[14:17], header[19]
    assert version == 7 and bpp == 32, header
    start = size + 12 * ncolors
    pixels = np.frombuffer(
        data, dtype="<u4" if byte_order == 0 else ">u4", count=height * stride // 4, offset=start
    )
    pixels = pixels.reshape(height, stride // 4)[:, :width]
    channels = [(pixels & m) >> (int(m).bit_length() - 8) for m in masks]  # 8 bits per channel
    return np.stack(channels, axis=-1).astype(np.uint8)


def _screenshot(path, expected: np.ndarray, tries: int = 40) -> np.ndarray:
    """The display once the window at its top-left corner shows ``expected`` (the X server draws
    asynchronously; pygame's flip has sent the frame), else the last picture taken."""
    height, width = expected.shape[:2]
    for _ in range(tries):
        screen = _read_xwd(path)
        if np.array_equal(screen[:height, :width], expected):
            break
        time.sleep(0.25)
    return screen


def test_breakout_window_on_an_xvfb_display(tmp_path):
    if shutil.which("Xvfb") is None:
        pytest.skip(
            "Xvfb is not installed (Debian: apt-get install -y xvfb); the headless tests above still ran"
        )
    server = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            "1",
            "-screen",
            "0",
            "640x480x24",
            "-fbdir",
            str(tmp_path),
            "-nolisten",
            "tcp",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        display = server.stdout.readline().strip().decode()  # written once the server accepts clients
        assert display.isdigit(), "Xvfb did not start"
        env = {**_env_without_display(), "DISPLAY": f":{display}", "SDL_VIDEODRIVER": "x11"}
        env.update(SDL_AUDIODRIVER="dummy", SDL_VIDEO_WINDOW_POS="0,0")  # the window at the top-left corner
        code = f"""
            import sys
            import gymnasium as gym, numpy as np, retro_atari_kit, pygame
            env = gym.make("RetroKit/Breakout-v0", render_mode="human")
            env.reset(seed=0)
            assert pygame.display.get_driver() == "x11", pygame.display.get_driver()
            env.action_space.seed(0)
            for _ in range(60):
                env.step(env.action_space.sample())
            np.save({str(tmp_path / "frame.npy")!r}, env.unwrapped.render())  # what the window shows now
            print("played", flush=True)
            sys.stdin.readline()  # the window stays open until the test has its screenshot
            env.close()
        """
        player = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = player.stdout.readline()
            assert line.strip() == "played", player.stderr.read()[-3000:]
            frame = np.load(tmp_path / "frame.npy")
            expected = np.repeat(np.repeat(frame, 2, axis=0), 2, axis=1)  # 210x160 shown 2x: 420x320
            screen = _screenshot(tmp_path / "Xvfb_screen0", expected)
        finally:
            player.communicate("\n", timeout=60)
        assert player.returncode == 0
    finally:
        server.terminate()
        server.wait(timeout=30)
    pygame.image.save(pygame.surfarray.make_surface(screen.transpose(1, 0, 2)), str(tmp_path / "window.png"))
    assert np.array_equal(screen[:420, :320], expected)  # the display shows the game's current frame
    colours = np.unique(screen.reshape(-1, 3), axis=0)
    assert len(colours) >= 6, colours  # bricks in six colours, walls, score: not a blank screen
