"""The kit's INTER_AREA kernel against OpenCV itself: bit-identical frames, or OpenCV's own path."""

import threading

import cv2
import gymnasium as gym
import numpy as np
import pytest

from retro_atari_kit.catalog import SCORE_CROP_BOXES
from retro_atari_kit.wrappers import area_resize
from retro_atari_kit.wrappers.area_resize import area_taps, load_kernel, resize_area_into

GAMES = ("Pong", "Breakout", "MsPacman", "SpaceInvaders", "Seaquest", "Qbert")


@pytest.fixture(scope="module", autouse=True)
def kernel():
    load_kernel()  # as the native backend does when it starts


def _real_gray_frames(per_game: int = 40) -> list[np.ndarray]:
    """Gray frames of real play (random actions) from several ALE games."""
    import ale_py

    gym.register_envs(ale_py)
    frames = []
    for game in GAMES:
        env = gym.make(f"ALE/{game}-v5", frameskip=4, repeat_action_probability=0.0)
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(per_game):
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            frames.append(cv2.cvtColor(obs, cv2.COLOR_RGB2GRAY))
            if terminated or truncated:
                env.reset()
        env.close()
    return frames


def _cv2(gray: np.ndarray, height: int, width: int) -> np.ndarray:
    return cv2.resize(gray, (width, height), interpolation=cv2.INTER_AREA)


def _ours(gray: np.ndarray, height: int, width: int) -> np.ndarray:
    out = np.empty((height, width), dtype=np.uint8)
    resize_area_into(gray, out)
    return out


def test_real_frames_of_several_games_and_every_score_crop_are_bit_identical():
    frames = _real_gray_frames()
    for gray in frames:
        np.testing.assert_array_equal(_ours(gray, 84, 84), _cv2(gray, 84, 84))
    for game, (top, bottom, left, right) in SCORE_CROP_BOXES.items():
        for gray in frames[::10]:
            cropped = gray[top:bottom, left:right]
            np.testing.assert_array_equal(_ours(cropped, 84, 84), _cv2(cropped, 84, 84), err_msg=game)
    assert area_resize._plans[(210, 160, 84, 84)] is not None  # the kernel did the work, not cv2


@pytest.mark.parametrize(
    "shape, size",
    [
        ((210, 160), (84, 84)),
        ((224, 320), (84, 84)),
        ((250, 250), (84, 84)),
        ((85, 97), (84, 84)),
        ((210, 160), (64, 48)),
        ((101, 333), (17, 59)),
    ],
)
def test_random_frames_are_bit_identical(shape, size):
    # random pixels reach every rounding case (ties included), not only the colours games draw
    rng = np.random.default_rng(sum(shape) + sum(size))
    for _ in range(20):
        gray = rng.integers(0, 256, shape, dtype=np.uint8)
        np.testing.assert_array_equal(_ours(gray, *size), _cv2(gray, *size))
    assert area_resize._plans[shape + size] is not None


def test_shapes_the_kernel_does_not_reproduce_use_opencv():
    # an integer scale takes OpenCV's integer fast path (other rounding) and upscaling is not an area
    # average: the self-check leaves both to cv2.resize, so the result is still OpenCV's
    rng = np.random.default_rng(1)
    for shape, size in (((168, 168), (84, 84)), ((42, 40), (84, 84))):
        gray = rng.integers(0, 256, shape, dtype=np.uint8)
        np.testing.assert_array_equal(_ours(gray, *size), _cv2(gray, *size))
        assert area_resize._plans[shape + size] is None


def test_writes_into_a_view_and_threads_get_the_same_frames():
    rng = np.random.default_rng(2)
    grays = [rng.integers(0, 256, (210, 160), dtype=np.uint8) for _ in range(16)]
    expected = np.stack([_cv2(g, 84, 84) for g in grays])[:, None]
    out = np.zeros((16, 1, 84, 84), dtype=np.uint8)

    def work(rows):
        for _ in range(20):
            for row in rows:
                resize_area_into(grays[row], out[row, 0])

    threads = [threading.Thread(target=work, args=(range(k, 16, 4),)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_array_equal(out, expected)


def test_unloaded_kernel_falls_back_to_opencv():
    gray = np.random.default_rng(3).integers(0, 256, (210, 160), dtype=np.uint8)
    area_resize.unload_kernel()
    try:
        np.testing.assert_array_equal(_ours(gray, 84, 84), _cv2(gray, 84, 84))
    finally:
        load_kernel()


def test_area_taps_weights_cover_each_output_cell_once():
    # every output pixel averages exactly one cell of the source: its weights sum to 1
    for source, dest in ((160, 84), (210, 84), (320, 84), (97, 84)):
        src, dst, weight = area_taps(source, dest)
        assert src.min() >= 0 and src.max() < source
        assert np.array_equal(np.unique(dst), np.arange(dest))
        np.testing.assert_allclose(np.bincount(dst, weights=weight), np.ones(dest), rtol=1e-5)


def test_without_numba_the_env_keeps_working_on_opencv(monkeypatch):
    # a machine where numba cannot be imported: one warning, cv2.resize's frames, no failure
    def no_numba():
        raise ImportError("No module named 'numba'")

    gray = np.random.default_rng(4).integers(0, 256, (210, 160), dtype=np.uint8)
    area_resize.unload_kernel()
    monkeypatch.setattr(area_resize, "_compile", no_numba)
    try:
        with pytest.warns(RuntimeWarning, match="cv2.resize instead"):
            load_kernel()
        np.testing.assert_array_equal(_ours(gray, 84, 84), _cv2(gray, 84, 84))
        load_kernel()  # warned once: no second warning, still cv2
    finally:
        monkeypatch.undo()
        area_resize.unload_kernel()
        load_kernel()
