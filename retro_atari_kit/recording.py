"""Full-colour videos of an agent (anything with SB3's ``predict``) for ``retrokit record`` (imageio: mp4
with ffmpeg, GIF otherwise)."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

from retro_atari_kit.envs.ale import DEFAULTS as ALE_DEFAULTS
from retro_atari_kit.envs.ale import MAX_FRAMES_PER_EPISODE
from retro_atari_kit.runs.files import check_output_path

# A recorded game ends at ALE's own cap at the latest: 108,000 frames = 27,000 agent steps of 4 frames.
DEFAULT_MAX_STEPS = MAX_FRAMES_PER_EPISODE // ALE_DEFAULTS["frame_skip"]
VIDEO_SUFFIXES = (".mp4", ".gif", ".webm", ".mkv", ".avi")


def has_ffmpeg() -> bool:
    try:
        import imageio_ffmpeg

        return bool(imageio_ffmpeg.get_ffmpeg_exe())
    except Exception:
        return False


def _overlay(frame: np.ndarray, text: str) -> np.ndarray:
    import cv2

    img = np.ascontiguousarray(frame)
    at = (2, img.shape[0] - 4)
    cv2.putText(img, text, at, cv2.FONT_HERSHEY_SIMPLEX, 0.35, (0, 0, 0), 2, cv2.LINE_AA)
    cv2.putText(img, text, at, cv2.FONT_HERSHEY_SIMPLEX, 0.35, (255, 255, 0), 1, cv2.LINE_AA)
    return img


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
) -> tuple[str, list[float]]:
    """Play ``episodes`` whole games and write the RGB screen (one frame per agent step) with the running
    true score drawn in the frame. ``.mp4`` falls back to ``.gif`` when ffmpeg is missing. A game ends
    after ``max_steps`` agent steps (default :data:`DEFAULT_MAX_STEPS`). ``out`` is checked
    (:func:`check_video_path`) before a game is played. Returns (path written, true scores)."""
    import cv2
    import imageio.v2 as imageio

    from retro_atari_kit.registration import make_env

    check_video_path(out)
    max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)
    root, ext = os.path.splitext(out)
    if ext.lower() != ".gif" and not has_ffmpeg():
        out = root + ".gif"
    env = make_env(env_id, **{**env_kwargs, "render_mode": "rgb_array"})
    fps = 60 / max(1, int(env_kwargs.get("frame_skip", ALE_DEFAULTS["frame_skip"])))
    frames: list[np.ndarray] = []
    scores: list[float] = []
    try:
        from retro_atari_kit.evaluation import check_model_fits

        check_model_fits(model, env_id, env.observation_space, env.action_space)
        obs, _ = env.reset(seed=seed)
        state, start = None, np.ones((1,), dtype=bool)
        total, steps = 0.0, 0
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
                big = cv2.resize(
                    frame, (frame.shape[1] * scale, frame.shape[0] * scale), interpolation=cv2.INTER_NEAREST
                )
                frames.append(_overlay(big, f"game {len(scores) + 1}  score {total:g}"))
            if ep is not None or steps >= max_steps:
                scores.append(total)
                total, steps = 0.0, 0
                state, start = None, np.ones((1,), dtype=bool)
                if len(scores) < episodes:
                    obs, _ = env.reset()
            elif terminated or truncated:
                obs, _ = env.reset()
    finally:
        env.close()
    if out.lower().endswith(".gif"):
        imageio.mimsave(out, frames[::2], duration=2000 / fps, loop=0)
    else:
        imageio.mimsave(out, frames, fps=fps, macro_block_size=8)
    return out, scores


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


def _has_score(env: gym.Env) -> bool:
    try:
        env.get_wrapper_attr("score")
        return True
    except AttributeError:
        return False
