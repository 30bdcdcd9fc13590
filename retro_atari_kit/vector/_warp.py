"""The warp of many frames at once, on a small pool of threads, off the calling thread.

:func:`retro_atari_kit.wrappers.warp_frame.warp_into` (crop, ``cv2.COLOR_RGB2GRAY``, ``cv2.INTER_AREA``
resize) is the only code that touches pixels, and OpenCV releases the GIL while it works, so the frames
of N envs are warped in parallel by ``threads`` threads, each taking one contiguous chunk of envs. The
output is that same function's output, so frames stay bit-identical to
:class:`~retro_atari_kit.wrappers.WarpFrame`.

A frame source may be a callable that fetches the frame first (the native backend passes ale-py's
blocking ``recv``): each thread then waits for its own envs and warps each frame as soon as it arrives,
while the other envs are still emulating, instead of the calling thread waiting for every env in turn.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from retro_atari_kit.wrappers.warp_frame import Box, warp_into

FrameSource = np.ndarray | Callable[[], np.ndarray]


def default_warp_threads(num_envs: int) -> int:
    """One thread per core, never more than the number of envs."""
    return max(1, min(num_envs, os.cpu_count() or 1))


class FrameWarper:
    """Warp ``(H, W, 3)`` RGB frames into rows of an ``(N, C, size, size)`` uint8 array on worker threads.

    :meth:`submit` returns at once (the caller may keep working); :meth:`wait` blocks until every frame
    is written and re-raises the first exception of a worker (a frame source's included).
    """

    def __init__(self, grayscale: bool, crop: Box | None, threads: int):
        if threads < 1:
            raise ValueError(f"warp threads must be >= 1, got {threads}")
        self.grayscale = grayscale
        self.crop = crop
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            threads, thread_name_prefix="retrokit-warp"
        )

    def _warp_chunk(self, sources: Sequence[FrameSource], rows: Sequence[int], out: np.ndarray) -> None:
        grayscale, crop = self.grayscale, self.crop
        for source, row in zip(sources, rows, strict=True):
            frame = source if isinstance(source, np.ndarray) else source()
            warp_into(frame, out[row], grayscale, crop)

    def submit(self, sources: Sequence[FrameSource], rows: Sequence[int], out: np.ndarray) -> list[Future]:
        """Start warping ``sources[k]`` (a frame, or a callable returning one) into ``out[rows[k]]``,
        in at most ``threads`` contiguous chunks."""
        if self._pool is None:
            raise RuntimeError("this FrameWarper is closed")
        n = len(sources)
        chunks = min(self.threads, n)
        bounds = [n * c // chunks for c in range(chunks + 1)]
        return [
            self._pool.submit(self._warp_chunk, sources[lo:hi], rows[lo:hi], out)
            for lo, hi in itertools.pairwise(bounds)
        ]

    def wait(self, pending: list[Future]) -> None:
        """Block until the submitted chunks are done; the first worker exception is raised here."""
        error = None
        for future in pending:  # wait for every chunk, so no thread still writes after an error
            exc = future.exception()
            error = error or exc
        if error is not None:
            raise error

    def warp(self, sources: Sequence[FrameSource], rows: Sequence[int], out: np.ndarray) -> None:
        """:meth:`submit` then :meth:`wait`."""
        self.wait(self.submit(sources, rows, out))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
