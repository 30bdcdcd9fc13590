"""Episode recorders wrapped around a kit env report the kit's true scores, one record per real game.

Where the record lives: a kit stack writes ``info["episode"] = {"r", "l", "t"}`` (true score: all lives,
unclipped; agent steps; seconds) on the step where the real game ends, and never at a life loss
(:class:`retro_atari_kit.wrappers.TrueScoreStatistics`). That is the key and layout every recorder uses,
so the kit's launcher, CLI, RLlib engine and SB3's logger read it as it is.

What an outer recorder then reports: a recorder wrapped around a kit env, which would otherwise sum the
clipped rewards of one life and stop at the life loss (or, in gymnasium's case, fail because the key is
taken), passes the kit's record on instead of writing its own. It reports one episode per real game with its
true score, in ``info[its stats key]`` and in its own statistics (``return_queue``, ``episode_count``, ...),
and nothing at a life loss. This module does that for gymnasium's ``RecordEpisodeStatistics`` (single and
vector), at ``import retro_atari_kit``; the SB3 integration does the same for SB3's ``Monitor`` and
``VecMonitor`` when SB3 is loaded. Around any other env the recorders behave exactly as gymnasium wrote them.

Videos are of games too: gymnasium's ``RecordVideo`` counts a ``reset()`` as a new episode, and a kit env
ending a training episode at a life loss continues the same game on the next ``reset()``. Around a kit env,
such a reset is not counted and the clip goes on, so ``episode_trigger`` and ``video_length=inf`` (gymnasium's
defaults) see whole games, with every life, as stock CleanRL records them.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import RecordEpisodeStatistics, RecordVideo
from gymnasium.wrappers.vector import RecordEpisodeStatistics as VectorRecordEpisodeStatistics

from retro_atari_kit.wrappers.true_score import reports_true_scores

KIT_ID_PREFIX = "RetroKit/"
# per recorder instance: does it wrap a kit env (decided at its first step, or at construction)
KIT_MODE_ATTR = "_retrokit_true_scores"
# per RecordVideo instance: its last step lost a life, so the kit's next reset continues the same game
CONTINUES_ATTR = "_retrokit_game_continues"


def vector_reports_true_scores(venv: Any) -> bool:
    """Whether ``venv`` (a gymnasium ``VectorEnv``, possibly wrapped) is made of kit envs: a kit vector env
    (``gym.make_vec`` of a kit ID), or gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` over kit envs."""
    env = venv
    while True:
        if getattr(type(env), "reports_true_scores", False):
            return True
        if not isinstance(env, gym.vector.VectorWrapper):
            break
        env = env.env
    if isinstance(env, gym.vector.SyncVectorEnv):
        return all(reports_true_scores(sub) for sub in env.envs)
    if isinstance(env, gym.vector.AsyncVectorEnv):
        # the envs live in other processes: their specs tell (asking for a missing attribute would make
        # every worker log an error for envs that are not the kit's)
        return are_kit_specs(env.get_attr("spec"))
    return False


def are_kit_specs(specs: Any) -> bool:
    """Whether every spec (of envs in other processes, which cannot be inspected) is a kit ID's."""
    return all(spec is not None and str(spec.id).startswith(KIT_ID_PREFIX) for spec in specs)


def wraps_kit_env(recorder: Any, check) -> bool:
    """Whether ``recorder`` wraps a kit env, by ``check`` of its ``env``; decided once, kept on it."""
    flag = recorder.__dict__.get(KIT_MODE_ATTR)
    if flag is None:
        flag = recorder.__dict__[KIT_MODE_ATTR] = bool(check(recorder.env))
    return flag


def episode_records(infos: dict[str, Any]) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """The kit's records in a vector env's step infos: ``(indices of the envs whose game ended, the
    "episode" arrays)``, from the top level (``NEXT_STEP``) or ``final_info`` (``SAME_STEP``), or None."""
    for source in (infos, infos.get("final_info") or {}):
        mask = source.get("_episode") if isinstance(source, dict) else None
        if mask is not None and np.any(mask):
            return np.flatnonzero(mask), source["episode"]
    return None


def _single_step(original):
    @functools.wraps(original)
    def step(self, action):
        if not wraps_kit_env(self, reports_true_scores):
            return original(self, action)
        obs, reward, terminated, truncated, info = self.env.step(action)
        record = info.get("episode") if (terminated or truncated) else None
        if record is not None:
            info[self._stats_key] = record
            self.return_queue.append(record["r"])
            self.length_queue.append(record["l"])
            self.time_queue.append(record["t"])
            self.episode_count += 1
        return obs, reward, terminated, truncated, info

    step._retrokit = True
    return step


def _vector_step(original):
    @functools.wraps(original)
    def step(self, actions):
        if not wraps_kit_env(self, vector_reports_true_scores):
            return original(self, actions)
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        found = episode_records(infos)
        if found is not None:
            indices, episode = found
            if self._stats_key != "episode":
                infos[self._stats_key] = episode
                infos[f"_{self._stats_key}"] = np.isin(np.arange(self.num_envs), indices)
            self.return_queue.extend(np.asarray(episode["r"])[indices].tolist())
            self.length_queue.extend(np.asarray(episode["l"])[indices].tolist())
            self.time_queue.extend(np.asarray(episode["t"])[indices].tolist())
            self.episode_count += len(indices)
        return obs, rewards, terminations, truncations, infos

    step._retrokit = True
    return step


def _video_step(original):
    @functools.wraps(original)
    def step(self, action):
        result = original(self, action)
        if wraps_kit_env(self, reports_true_scores):
            _, _, terminated, truncated, info = result
            # the kit's episodic-life rule: an end without the game's record is a life lost, not a game over
            self.__dict__[CONTINUES_ATTR] = bool(terminated) and not truncated and "episode" not in info
        return result

    step._retrokit = True
    return step


def _video_reset(original):
    @functools.wraps(original)
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        continues = self.__dict__.pop(CONTINUES_ATTR, False) and seed is None
        if not (continues and wraps_kit_env(self, reports_true_scores)):
            return original(self, seed=seed, options=options)
        # the same game goes on: not a new episode for the trigger, and the clip keeps recording it
        obs, info = self.env.reset(seed=seed, options=options)
        if self.recording:
            self._capture_frame()
            if len(self.recorded_frames) > self.video_length:
                self.stop_recording()
        return obs, info

    reset._retrokit = True
    return reset


def adapt_gymnasium_recorders() -> None:
    """Make gymnasium's ``RecordEpisodeStatistics`` (single and vector) pass a kit env's true-score record
    on, and its ``RecordVideo`` count a kit env's games, not its lives (see the module docstring).
    Idempotent; other envs are unaffected."""
    for cls, make in ((RecordEpisodeStatistics, _single_step), (VectorRecordEpisodeStatistics, _vector_step)):
        if not getattr(cls.step, "_retrokit", False):
            cls.step = make(cls.step)
    # what the adapted reset uses of RecordVideo (gymnasium 1.x); another shape is left as gymnasium wrote it
    if all(hasattr(RecordVideo, name) for name in ("_capture_frame", "stop_recording", "reset", "step")):
        if not getattr(RecordVideo.reset, "_retrokit", False):
            RecordVideo.reset = _video_reset(RecordVideo.reset)
            RecordVideo.step = _video_step(RecordVideo.step)
