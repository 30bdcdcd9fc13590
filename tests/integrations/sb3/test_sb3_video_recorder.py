"""SB3's own ``VecVideoRecorder`` over the kit's ``KitVecEnv``: the video plays at the env's real speed."""

from __future__ import annotations

import imageio
import numpy as np
from retro_atari_kit.integrations.sb3 import make_vec_env
from stable_baselines3.common.vec_env import VecVideoRecorder


def test_vec_video_recorder_writes_the_kits_render_fps(tmp_path):
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=2, seed=0, render_mode="rgb_array")
    recorder = VecVideoRecorder(
        venv, str(tmp_path), record_video_trigger=lambda step: step == 0, video_length=20, name_prefix="pong"
    )
    try:
        recorder.reset()
        for _ in range(25):
            recorder.step(np.zeros(2, dtype=np.int64))
    finally:
        recorder.close()
    (video,) = tmp_path.glob("pong-*.mp4")
    reader = imageio.get_reader(video)
    try:
        assert reader.get_meta_data()["fps"] == 15.0
        frames = [frame for frame in reader]
    finally:
        reader.close()
    assert len(frames) >= 20
    assert venv.metadata["render_fps"] == 15.0  # 60 emulator frames/s, one rendered frame per 4
    assert frames[0].ndim == 3 and frames[0].shape[2] == 3  # RGB screens of the two envs, tiled
