"""Crop, grayscale and resize frames; channel-first uint8 out."""

from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np

from retro_atari_kit.wrappers.area_resize import resize_area_into

Box = tuple[int, int, int, int]


class WarpFrame(gym.ObservationWrapper):
    """Turn an ``(H, W, 3)`` RGB frame into a channel-first uint8 ``(C, size, size)`` frame.

    Steps, in order: optional crop to ``crop = (top, bottom, left, right)`` (rows ``top:bottom`` and
    columns ``left:right`` of the full frame are kept), grayscale with ``cv2.COLOR_RGB2GRAY`` (``C=1``;
    ``grayscale=False`` keeps RGB, ``C=3``), resize to ``size x size`` with ``cv2.INTER_AREA``.
    No floats are created.
    """

    def __init__(self, env: gym.Env, size: int = 84, grayscale: bool = True, crop: Box | None = None):
        super().__init__(env)
        height, width = env.observation_space.shape[:2]
        if crop is not None:
            top, bottom, left, right = crop
            if not (0 <= top < bottom <= height and 0 <= left < right <= width):
                raise ValueError(
                    f"crop_score box {crop} is outside the {height}x{width} screen; "
                    "expected (top, bottom, left, right) with 0 <= top < bottom <= height, "
                    "0 <= left < right <= width"
                )
        self.size = size
        self.grayscale = grayscale
        self.crop = crop
        channels = 1 if grayscale else 3
        self.observation_space = gym.spaces.Box(0, 255, (channels, size, size), dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return crop_and_resize(observation, self.size, self.grayscale, self.crop)


def crop_and_resize(frame: np.ndarray, size: int, grayscale: bool, crop: Box | None) -> np.ndarray:
    """The transformation of :class:`WarpFrame` on one ``(H, W, 3)`` uint8 RGB frame."""
    out = np.empty((1 if grayscale else 3, size, size), dtype=np.uint8)
    warp_into(frame, out, grayscale, crop)
    return out


def warp_into(frame: np.ndarray, out: np.ndarray, grayscale: bool, crop: Box | None) -> None:
    """:func:`crop_and_resize` writing into ``out``, a ``(C, size, size)`` uint8 array (a view is fine).

    The one definition of the warp: :class:`WarpFrame` and the native vector backend's threads call it.
    Only OpenCV calls and a numba ``nogil`` kernel touch the pixels; both release the GIL, so threads warp
    frames in parallel.
    """
    if crop is not None:
        top, bottom, left, right = crop
        frame = frame[top:bottom, left:right]
    size = out.shape[-1]
    if grayscale:
        # cv2's INTER_AREA result, computed cheaper where the kernel is loaded (see area_resize.py)
        resize_area_into(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), out[0])
    else:
        out[:] = cv2.resize(frame, (size, size), interpolation=cv2.INTER_AREA).transpose(2, 0, 1)
