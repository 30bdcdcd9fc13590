"""Full-colour videos of an agent (anything with SB3's ``predict``) for ``retrokit record`` (imageio: mp4
with ffmpeg, GIF otherwise)."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from retro_atari_kit.envs._options import FRAME_SKIP
from retro_atari_kit.envs.ale import MAX_FRAMES_PER_EPISODE
from retro_atari_kit.errors import check_output_path
from retro_atari_kit.evaluation import check_model_fits
from retro_atari_kit.evaluation.play import seeded_draws
from retro_atari_kit.files import atomic_write, check_creatable, os_error_message
from retro_atari_kit.models.threads import playing_threads
from retro_atari_kit.registration import make_env

# A recorded game ends at ALE's own cap at the latest: 108,000 frames = 27,000 agent steps of 4 frames.
DEFAULT_MAX_STEPS = MAX_FRAMES_PER_EPISODE // FRAME_SKIP.default
VIDEO_SUFFIXES = (".mp4", ".gif", ".webm", ".mkv", ".avi")


def has_ffmpeg() -> bool:
    try:
        import imageio_ffmpeg

        return bool(imageio_ffmpeg.get_ffmpeg_exe())
    except Exception:
        return False


# ffmpeg's encoders want both sides divisible by 16 (imageio's macro block): a frame of another size is
# resized by imageio, with a warning. Frames are padded to it here, so nothing is resized behind our back.
MACRO_BLOCK = 16
# the score bar below the screen is at least this tall (pixels of the video); its text ~60% of it
SCORE_BAR_MIN = 24


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def video_frame(screen: np.ndarray, text: str, scale: int = 2) -> np.ndarray:
    """One video frame: the RGB ``screen`` upscaled ``scale`` x by nearest neighbour (sharp pixels), a
    black bar below it with ``text`` in white, both sides padded to multiples of :data:`MACRO_BLOCK`.

    The text sits in its own bar rather than on the game, so it is legible on any screen (a 160x210 Atari
    frame gives a 320x448 video with ~17-pixel-tall text) and hides nothing of the game."""
    import cv2

    h, w = screen.shape[0] * scale, screen.shape[1] * scale
    out = np.zeros((_round_up(h + SCORE_BAR_MIN, MACRO_BLOCK), _round_up(w, MACRO_BLOCK), 3), np.uint8)
    out[:h, :w] = cv2.resize(screen[..., :3], (w, h), interpolation=cv2.INTER_NEAREST)
    bar = out.shape[0] - h
    font, thickness = cv2.FONT_HERSHEY_SIMPLEX, 2 if bar >= 28 else 1
    size = cv2.getFontScaleFromHeight(font, max(8, int(bar * 0.6)), thickness)
    (tw, th), _ = cv2.getTextSize(text, font, size, thickness)
    if tw > out.shape[1] - 12:  # a long text on a narrow screen: smaller, never cut off
        size *= (out.shape[1] - 12) / tw
        (tw, th), _ = cv2.getTextSize(text, font, size, thickness)
    cv2.putText(out, text, (6, h + (bar + th) // 2), font, size, (255, 255, 255), thickness, cv2.LINE_AA)
    return out


def record_video(
    model: Any,
    env_id: str,
    env_kwargs: dict[str, Any],
    out: str,
    episodes: int = 1,
    seed: int = 0,
    deterministic: bool = False,
    max_steps: int | None = None,
    scale: int = 2,
    cut: list[int] | None = None,
) -> tuple[str, list[float]]:
    """Play ``episodes`` whole games and write the RGB screen (one frame per agent step) with the running
    true score drawn in the frame. ``.mp4`` falls back to ``.gif`` when ffmpeg is missing. A game ends
    after ``max_steps`` agent steps (default :data:`DEFAULT_MAX_STEPS`); the numbers (from 1) of the games
    it cut short are appended to ``cut`` when given. ``out`` is checked (:func:`check_video_path`) before
    a game is played. Returns (path written, true scores)."""
    check_video_path(out)
    max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)
    root, ext = os.path.splitext(out)
    if ext.lower() != ".gif" and not has_ffmpeg():
        out = root + ".gif"
    env = make_env(env_id, **{**env_kwargs, "render_mode": "rgb_array"})
    fps = 60 / max(1, int(env_kwargs.get("frame_skip", FRAME_SKIP.default)))
    frames: list[np.ndarray] = []
    scores: list[float] = []
    try:
        check_model_fits(model, env_id, env.observation_space, env.action_space)
        obs, _ = env.reset(seed=seed)
        state, start = None, np.ones((1,), dtype=bool)
        total, steps = 0.0, 0
        # batch-1 forwards: one torch thread; every draw of the model from `seed` (the same video again)
        with playing_threads(), seeded_draws(model, seed):
            while len(scores) < episodes:
                action, state = model.predict(
                    obs[None], state=state, episode_start=start, deterministic=deterministic
                )
                obs, _, terminated, truncated, info = env.step(int(action[0]))
                start = np.array([terminated or truncated])
                steps += 1
                frame = env.render()
                ep = info.get("episode")
                if ep is not None:
                    total = float(ep["r"])
                elif frame is not None:
                    total = float(env.get_wrapper_attr("score")) if _has_score(env) else total
                if frame is not None:
                    frames.append(video_frame(frame, f"game {len(scores) + 1}   score {total:g}", scale))
                if ep is not None or steps >= max_steps:
                    if ep is None and cut is not None:  # the game did not end: its score is a part
                        cut.append(len(scores) + 1)
                    scores.append(total)
                    total, steps = 0.0, 0
                    state, start = None, np.ones((1,), dtype=bool)
                    if len(scores) < episodes:
                        obs, _ = env.reset()
                elif terminated or truncated:
                    obs, _ = env.reset()
    finally:
        env.close()
    write_video(out, frames, fps)
    return out, scores


def write_video(out: str, frames: list[np.ndarray], fps: float) -> None:
    """Write ``frames`` to ``out`` (a GIF keeps every other frame) as a whole or not at all: written under a
    temporary name and renamed (``files.atomic_write``), so a failure (a full disk, a name ffmpeg
    cannot open) leaves no half video and an older file at ``out`` as it was. Raises OSError naming ``out``
    with the reason ffmpeg gave; ffmpeg's own lines are not shown."""
    import imageio.v2 as imageio

    def write(tmp: str) -> None:
        if out.lower().endswith(".gif"):  # encoded in memory: a full disk is one OSError of ours, not the
            data = imageio.mimsave("<bytes>", frames[::2], format="GIF", duration=2000 / fps, loop=0)
            with open(tmp, "wb") as fh:  # plugin's error and its second one when it is collected
                fh.write(data)
            return
        failed = None
        with _stderr_of_children() as said:
            try:
                imageio.mimsave(tmp, frames, fps=fps, macro_block_size=MACRO_BLOCK, ffmpeg_log_level="error")
            except OSError as exc:  # ffmpeg went away: the pipe to it broke
                failed = exc
        if failed is not None or said:  # ffmpeg says only errors at this level
            raise _ffmpeg_error(said, tmp) from failed

    atomic_write(out, write)


@contextlib.contextmanager
def _stderr_of_children() -> Iterator[list[str]]:
    """For the block, file descriptor 2 (where ffmpeg, a child process, writes) goes to a temporary file;
    its lines fill the yielded list after the block."""
    lines: list[str] = []
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    try:
        log = tempfile.TemporaryFile()
        saved = os.dup(2)
    except OSError:  # nowhere to put it: ffmpeg's lines are shown
        yield lines
        return
    with log:
        os.dup2(log.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            lines.extend(line for line in log.read().decode(errors="replace").splitlines() if line.strip())


def _ffmpeg_error(said: list[str], path: str) -> OSError:
    """An OSError for a video ffmpeg could not write: the errno of the reason it gave (its lines end with
    the C library's words, e.g. "No space left on device"), else EIO with its last line."""
    text = " ".join(said)
    for code in (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.EROFS, errno.EACCES, errno.ENOENT):
        if os.strerror(code) in text:
            return OSError(code, os.strerror(code), path)
    return OSError(errno.EIO, f"ffmpeg could not write it ({said[-1] if said else 'no reason given'})", path)


def check_video_path(out: str) -> None:
    """ValueError (one line) unless ``out`` names a video file (:data:`VIDEO_SUFFIXES`) that can be
    written."""
    if os.path.splitext(out)[1].lower() not in VIDEO_SUFFIXES:
        if os.path.isdir(out):
            raise ValueError(
                f"--out {out}: is a folder; pass a video file name, e.g. {os.path.join(out, 'agent.mp4')}"
            )
        raise ValueError(f"--out {out!r}: use a .mp4 or .gif file name")
    check_output_path(out)

    try:  # a name too long, /proc, a read-only disk: said before a game is played
        check_creatable(out)
    except OSError as exc:
        raise ValueError(os_error_message(exc, "--out", flag="--out")) from None


def _has_score(env: gym.Env) -> bool:
    try:
        env.get_wrapper_attr("score")
        return True
    except AttributeError:
        return False
