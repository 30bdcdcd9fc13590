"""OpenCV's ``INTER_AREA`` downscaling of 8-bit gray frames: bit-identical, computed a few times cheaper.

``cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA)`` from 210x160 is most of the cost of the
kit's warp (docs/performance.md has the figures). For a non-integer scale OpenCV runs a scalar loop: it
resizes each source row horizontally into a float32 buffer with fixed per-column weights, then adds
``weight * buffer`` row by row into the output row, and rounds once (ties to even, saturated to uint8).
The result depends on the order of those float32 operations, so this module performs exactly the same
multiplications and additions in the same order, only laid out so that both passes run over contiguous
memory and vectorise:

1. ``cv2.transpose`` the gray frame (source columns become rows);
2. horizontal pass over whole source columns at once: for each output column its taps in OpenCV's order
   (``0 + s0*a0``, ``+ s1*a1``, ...);
3. vertical pass per output row over all output columns at once: ``b0*h0``, then ``+ b_k*h_k``, then
   ``rint`` and saturation, as OpenCV's ``saturate_cast``.

Step 1 runs in OpenCV and steps 2-3 in a numba kernel compiled with ``nogil`` and without fast-math (each
operation a separate IEEE float32 multiply or add, as in OpenCV's loop), so like OpenCV the resize releases
the GIL and warp threads run it in parallel. The per-axis weights are computed as OpenCV computes them
(double precision, stored as float32).

The kernel is used once :func:`load_kernel` has run in the process (loading numba takes about a second,
which only long-lived frame producers should pay). Proof, not assumption: for each shape the first call
compares the kernel with ``cv2.resize`` on a fixed random frame and leaves that shape to ``cv2.resize`` if
they differ (another OpenCV build; integer scales, where OpenCV takes an integer fast path), and
``tests/core/test_area_resize.py`` compares them on real frames of several games, random frames of several
shapes and every catalog crop. Upscaling always uses ``cv2.resize``.
"""

from __future__ import annotations

import math
import threading
import warnings

import cv2
import numpy as np

Taps = tuple[np.ndarray, np.ndarray, np.ndarray]  # source index, destination index, float32 weight
_lock = threading.Lock()  # one compilation / self-check at a time when warp threads start together


def area_taps(source: int, dest: int) -> Taps:
    """OpenCV's area-interpolation taps for one axis (``computeResizeAreaTab``), in OpenCV's order:
    by destination index, then by source index; a partial source cell first and last."""
    scale = 1.0 / (dest / source)  # OpenCV's scale_x = 1 / inv_scale_x, in double precision
    src_index, dst_index, weight = [], [], []
    for d in range(dest):
        start = d * scale
        end = start + scale
        cell = min(scale, source - start)
        first, last = math.ceil(start), math.floor(end)
        last = min(last, source - 1)
        first = min(first, last)
        if first - start > 1e-3:
            src_index.append(first - 1)
            dst_index.append(d)
            weight.append((first - start) / cell)
        for s in range(first, last):
            src_index.append(s)
            dst_index.append(d)
            weight.append(1.0 / cell)
        if end - last > 1e-3:
            src_index.append(last)
            dst_index.append(d)
            weight.append(min(min(end - last, 1.0), cell) / cell)
    return (
        np.asarray(src_index, dtype=np.int64),
        np.asarray(dst_index, dtype=np.int64),
        np.asarray(weight, dtype=np.float32),
    )


def _compile():
    import numba

    @numba.njit(nogil=True, cache=True)
    def area_kernel(source_t, dst, xs, xd, xa, ys, yd, ya):  # pragma: no cover - compiled by numba
        # source_t: the (W, H) transposed uint8 frame; dst: (h, w) uint8
        height = source_t.shape[1]
        h, w = dst.shape
        # horizontal pass: row dx of columns_t holds output column dx for every source row
        columns_t = np.zeros((w, height), np.float32)
        for k in range(xs.shape[0]):
            weight = xa[k]
            src = source_t[xs[k]]
            acc = columns_t[xd[k]]
            for r in range(height):
                acc[r] += np.float32(src[r]) * weight
        # vertical pass: the first tap of an output row sets it, the others add, as OpenCV's loop; the row
        # is rounded and stored after its last tap (taps come sorted by output row)
        row = np.empty(w, np.float32)
        last = ys.shape[0] - 1
        for j in range(last + 1):
            weight = ya[j]
            col = columns_t[:, ys[j]]
            if j == 0 or yd[j] != yd[j - 1]:
                for dx in range(w):
                    row[dx] = weight * col[dx]
            else:
                for dx in range(w):
                    row[dx] += weight * col[dx]
            if j == last or yd[j + 1] != yd[j]:
                out = dst[yd[j]]
                for dx in range(w):
                    out[dx] = np.uint8(min(max(np.rint(row[dx]), np.float32(0)), np.float32(255)))

    return area_kernel


_kernel = None  # set by load_kernel()
_unavailable = False  # numba could not be imported or could not compile the kernel here
_plans: dict[tuple[int, int, int, int], tuple[Taps, Taps] | None] = {}


def load_kernel() -> None:
    """Compile (or load from numba's on-disk cache) the kernel, so :func:`resize_area_into` uses it.

    Costs about a second once per process (importing numba and loading its cached machine code; a few
    seconds the very first time, when it compiles), so only long-lived frame producers call it: the
    native backend when it starts. Until then :func:`resize_area_into` calls ``cv2.resize``: the
    result is the same, only the cost differs. Where numba cannot be imported, this warns once and
    leaves ``cv2.resize`` in charge (same frames, slower) instead of failing the env.
    """
    global _kernel, _unavailable
    with _lock:  # warp threads or backends starting together: one compilation
        if _kernel is not None or _unavailable:
            return
        try:
            _kernel = _compile()
        except Exception as exc:
            _unavailable = True
            _warn_unavailable(exc)


def _warn_unavailable(exc: BaseException) -> None:
    warnings.warn(
        f"retro-atari-kit: the exact INTER_AREA resize kernel is unavailable ({type(exc).__name__}: "
        f"{exc}); frames are resized by cv2.resize instead (the same frames, more CPU). Reinstall numba "
        "to get it back.",
        RuntimeWarning,
        stacklevel=3,
    )


def unload_kernel() -> None:
    """Back to ``cv2.resize`` in this process (for side-by-side comparisons in ``benchmarks/``)."""
    global _kernel, _unavailable
    with _lock:
        _kernel, _unavailable = None, False


def _plan(kernel, height: int, width: int, out_height: int, out_width: int) -> tuple[Taps, Taps] | None:
    """The taps of both axes if ``kernel`` reproduces ``cv2.resize`` for this shape, else ``None``."""
    if out_height > height or out_width > width:
        return None  # upscaling: OpenCV's INTER_AREA is not an area average there
    plan = (area_taps(width, out_width), area_taps(height, out_height))
    probe = np.random.default_rng(0).integers(0, 256, (height, width), dtype=np.uint8)
    ours = np.empty((out_height, out_width), dtype=np.uint8)
    try:
        _run(kernel, probe, ours, plan)  # numba compiles here on the very first call
    except Exception as exc:
        _warn_unavailable(exc)
        return None
    theirs = cv2.resize(probe, (out_width, out_height), interpolation=cv2.INTER_AREA)
    return plan if np.array_equal(ours, theirs) else None


def _run(kernel, gray: np.ndarray, out: np.ndarray, plan: tuple[Taps, Taps]) -> None:
    (xs, xd, xa), (ys, yd, ya) = plan
    kernel(cv2.transpose(gray), out, xs, xd, xa, ys, yd, ya)


def resize_area_into(gray: np.ndarray, out: np.ndarray) -> None:
    """Write ``cv2.resize(gray, out.shape[::-1], interpolation=cv2.INTER_AREA)`` into ``out``.

    ``gray``: an ``(H, W)`` uint8 frame; ``out``: an ``(h, w)`` uint8 array (a view is fine). Exactly
    OpenCV's result, computed by the kernel once :func:`load_kernel` has run and the kernel was verified
    for this shape, else by ``cv2.resize`` itself.
    """
    plan, kernel = None, _kernel  # one read: unload_kernel may run in another thread
    if kernel is not None:
        key = gray.shape + out.shape
        try:
            plan = _plans[key]
        except KeyError:
            with _lock:  # one check per shape when warp threads meet a new shape together
                if key not in _plans:
                    _plans[key] = _plan(kernel, *key)
                plan = _plans[key]
    if plan is None:
        cv2.resize(gray, (out.shape[1], out.shape[0]), dst=out, interpolation=cv2.INTER_AREA)
    else:
        _run(kernel, gray, out, plan)
