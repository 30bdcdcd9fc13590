"""The adapters of gymnasium's recorders: opt-out by environment variable (a fresh process), undo by
``disable_adapters`` and redo by ``enable_adapters``, and the delegating step's statistics when gymnasium's
queues are full.

Space Invaders has three lives: a recorder that is not adapted records at the first life loss (lives left),
an adapted one at the game over (no lives left), with the kit's record.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from gymnasium.wrappers import RecordEpisodeStatistics, common
from gymnasium.wrappers.vector import common as vector_common

import retro_atari_kit
from retro_atari_kit.adapters import MARK, adapted
from retro_atari_kit.registration import make_env

GAME = "RetroKit/SpaceInvaders-v0"


def _play_until_recorded(recorder, count: int = 1):
    """Random play until ``recorder`` has recorded ``count`` episodes: (the step's info, lives left then)."""
    recorder.reset(seed=0)
    rng = np.random.default_rng(0)
    while True:
        _, _, terminated, truncated, info = recorder.step(int(rng.integers(recorder.action_space.n)))
        if recorder.episode_count >= count:
            return info, recorder.unwrapped.ale.lives()
        if terminated or truncated:
            recorder.reset()


def test_disable_restores_gymnasiums_own_step_and_enable_adapts_it_again():
    adapted_step = common.RecordEpisodeStatistics.step
    assert getattr(adapted_step, MARK, False) and retro_atari_kit.adapters_enabled()
    try:
        retro_atari_kit.disable_adapters()
        assert not retro_atari_kit.adapters_enabled() and adapted() == []
        assert common.RecordEpisodeStatistics.step is adapted_step.__wrapped__  # gymnasium's own function
        assert not hasattr(vector_common.RecordEpisodeStatistics.step, MARK)
        info, lives = _play_until_recorded(RecordEpisodeStatistics(make_env(GAME), stats_key="stats"))
        assert lives > 0 and "episode" not in info  # gymnasium's record of one life
    finally:
        retro_atari_kit.enable_adapters()
    assert getattr(common.RecordEpisodeStatistics.step, MARK, False)
    assert "gymnasium.wrappers.common.RecordEpisodeStatistics.step" in adapted()
    recorder = RecordEpisodeStatistics(make_env(GAME), stats_key="stats")
    info, lives = _play_until_recorded(recorder)
    assert lives == 0 and info["stats"] is info["episode"]  # the game over, with the kit's record
    assert list(recorder.return_queue) == [info["episode"]["r"]] and info["episode"]["r"] % 5 == 0


def test_a_full_queue_keeps_the_true_scores_gymnasium_would_drop():
    """gymnasium's queues drop their oldest entry when full: a life loss must not push a true score out."""
    recorder = RecordEpisodeStatistics(make_env(GAME), buffer_length=1)
    info, _ = _play_until_recorded(recorder)
    first = info["episode"]
    rng = np.random.default_rng(1)
    recorder.reset()
    lives = recorder.unwrapped.ale.lives()
    while recorder.unwrapped.ale.lives() == lives:  # into the next game, up to its first life loss
        _, _, terminated, truncated, info = recorder.step(int(rng.integers(recorder.action_space.n)))
        assert not (terminated or truncated) or recorder.unwrapped.ale.lives() < lives
    assert terminated and "episode" not in info
    assert recorder.episode_count == 1
    assert list(recorder.return_queue) == [first["r"]] and list(recorder.length_queue) == [first["l"]]


def test_retrokit_adapters_0_adapts_nothing_until_enabled():
    code = (
        "import sys, retro_atari_kit\n"
        "from gymnasium.wrappers import RecordEpisodeStatistics\n"
        "from retro_atari_kit.adapters import MARK, adapted\n"
        "hooks = any(type(f).__module__.startswith('wrapt') for f in sys.meta_path)\n"
        "print(retro_atari_kit.adapters_enabled(), adapted(), hasattr(RecordEpisodeStatistics.step, MARK),"
        " hooks)\n"
        "retro_atari_kit.enable_adapters()\n"
        "print(retro_atari_kit.adapters_enabled(), hasattr(RecordEpisodeStatistics.step, MARK))\n"
    )
    env = {**os.environ, "RETROKIT_ADAPTERS": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["False [] False False", "True True"]
