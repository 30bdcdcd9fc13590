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
import queue
import threading
from collections.abc import Callable, Sequence

import numpy as np

from retro_atari_kit.wrappers.warp_frame import Box, warp_into

FrameSource = np.ndarray | Callable[[], np.ndarray]


class Pending:
    """What :meth:`FrameWarper.submit` hands to :meth:`FrameWarper.wait`: the last of its chunks to finish
    wakes the waiting thread, once (a wake-up per chunk cost the calling thread one more per step,
    docs/performance.md)."""

    def __init__(self, chunks: int):
        self._left = itertools.count(chunks - 1, -1)  # next() is atomic under the GIL
        self._finished = threading.Lock()
        self._finished.acquire()
        self.error: BaseException | None = None

    def chunk_done(self, error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = error
        if next(self._left) == 0:
            self._finished.release()

    def wait(self) -> None:
        self._finished.acquire()


def default_warp_threads(num_envs: int) -> int:
    """Two threads, or one for fewer than three envs, whatever the core count.

    The GIL, not the cores, bounds the warp threads: each frame costs a few returns from ale-py, OpenCV and
    the numba kernel that take the GIL back, so more threads only contend for it (on 16 cores, 4, 8 and 16
    threads were each slower than 2; docs/performance.md, "16 cores"). One thread is slower on any machine:
    the frames of the envs that finish last are warped one after the other.
    """
    return max(1, min((num_envs + 1) // 2, 2))


class FrameWarper:
    """Warp ``(H, W, 3)`` RGB frames into rows of an ``(N, C, size, size)`` uint8 array on worker threads.

    :meth:`submit` returns at once (the caller may keep working); :meth:`wait` blocks until every frame
    is written and re-raises the first exception of a worker (a frame source's included). ``threads=0``
    does the work inside :meth:`submit`, in the calling thread (for comparisons).
    """

    def __init__(self, grayscale: bool, crop: Box | None, threads: int):
        if threads < 0:
            raise ValueError(f"warp threads must be >= 0, got {threads}")
        self.grayscale = grayscale
        self.crop = crop
        self.threads = threads
        # One job queue per thread, so chunk k always runs on thread k; results come back on a queue per
        # submit. (A ThreadPoolExecutor's futures cost the calling thread several times more CPU.)
        self._jobs: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(threads)]
        self._threads = [
            threading.Thread(target=self._serve, args=(jobs,), name=f"retrokit-warp-{k}", daemon=True)
            for k, jobs in enumerate(self._jobs)
        ]
        for thread in self._threads:
            thread.start()
        self._closed = False

    def _serve(self, jobs: queue.SimpleQueue) -> None:
        while (job := jobs.get()) is not None:
            self._run(*job)
            job = None  # hold no frames or driver between steps

    def _run(self, sources, rows, out, start, done: Pending) -> None:
        try:
            self._warp_chunk(sources, rows, out, start)
        except BaseException as exc:  # handed to the waiting thread
            done.chunk_done(exc)
        else:
            done.chunk_done(None)

    def _warp_chunk(
        self,
        sources: Sequence[FrameSource],
        rows: Sequence[int],
        out: np.ndarray,
        start: Callable[[Sequence[int]], None] | None,
    ) -> None:
        if start is not None:
            start(rows)
        grayscale, crop = self.grayscale, self.crop
        for source, row in zip(sources, rows, strict=True):
            frame = source if isinstance(source, np.ndarray) else source()
            warp_into(frame, out[row], grayscale, crop)

    def submit(
        self,
        sources: Sequence[FrameSource],
        rows: Sequence[int],
        out: np.ndarray,
        start: Callable[[Sequence[int]], None] | None = None,
    ) -> Pending:
        """Start warping ``sources[k]`` (a frame, or a callable returning one) into ``out[rows[k]]``,
        in at most ``threads`` contiguous chunks. ``start(chunk_rows)``, if given, runs first in each
        chunk's thread (the native backend sends the chunk's actions there)."""
        if self._closed:
            raise RuntimeError("this FrameWarper is closed")
        n = len(sources)
        if self.threads == 0:  # in the calling thread
            done = Pending(1)
            self._run(sources, rows, out, start, done)
            return done
        chunks = min(self.threads, n)
        bounds = [n * c // chunks for c in range(chunks + 1)]
        done = Pending(chunks)
        for jobs, (lo, hi) in zip(self._jobs, itertools.pairwise(bounds), strict=False):
            jobs.put((sources[lo:hi], rows[lo:hi], out, start, done))
        return done

    def wait(self, pending: Pending) -> None:
        """Block until the submitted chunks are done; the first worker exception is raised here."""
        pending.wait()  # every chunk, so no thread writes after an error
        if pending.error is not None:
            raise pending.error

    def warp(self, sources: Sequence[FrameSource], rows: Sequence[int], out: np.ndarray) -> None:
        """:meth:`submit` then :meth:`wait`."""
        self.wait(self.submit(sources, rows, out))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for jobs in self._jobs:
            jobs.put(None)
        for thread in self._threads:
            thread.join()
