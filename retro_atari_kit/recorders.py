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

from retro_atari_kit.adapters import Adapter, marked, proxied
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


_QUEUES = ("return_queue", "length_queue", "time_queue")


def _snapshot(recorder: Any) -> tuple[list[list[Any]], Any]:
    """A gymnasium recorder's statistics as they are now (its queues drop their oldest entry when full)."""
    return [list(getattr(recorder, name)) for name in _QUEUES], recorder.episode_count


def _restore(recorder: Any, snapshot: tuple[list[list[Any]], Any], records: list[tuple]) -> None:
    """Put the statistics back as they were, then add the kit's ``records`` ((r, l, t) per real game)."""
    queues, count = snapshot
    for index, name in enumerate(_QUEUES):  # records: (r, l, t), the queues' order
        queue = getattr(recorder, name)
        queue.clear()
        queue.extend(queues[index])
        queue.extend(record[index] for record in records)
    recorder.episode_count = count + len(records)


def _single_step(original):
    """gymnasium's own ``step`` runs; around a kit env the kit's record (kept from it: it would fail on the
    key being taken) replaces the per-life clipped one it made, and a life loss leaves no record."""

    @functools.wraps(original)
    def step(self, action):
        if not wraps_kit_env(self, reports_true_scores):
            return original(self, action)
        seen: dict[str, Any] = {}

        def keep_record(result):
            _, _, terminated, truncated, info = result
            if terminated or truncated:
                seen["snapshot"] = _snapshot(self)
                seen["record"] = info.pop("episode", None)
            return result

        with proxied(self, "env", "step", keep_record):
            obs, reward, terminated, truncated, info = original(self, action)
        if "snapshot" in seen:
            record = seen["record"]
            info.pop(self._stats_key, None)
            records = [] if record is None else [(record["r"], record["l"], record["t"])]
            _restore(self, seen["snapshot"], records)
            if record is not None:
                info["episode"] = info[self._stats_key] = record
        return obs, reward, terminated, truncated, info

    return marked(step)


def _vector_step(original):
    """The vector recorder's own ``step`` runs; around kit envs the kit's records replace its per-life
    ones."""

    @functools.wraps(original)
    def step(self, actions):
        if not wraps_kit_env(self, vector_reports_true_scores):
            return original(self, actions)
        seen: dict[str, Any] = {}

        def keep_records(result):
            _, _, terminations, truncations, infos = result
            if np.any(terminations) or np.any(truncations):
                seen["snapshot"] = _snapshot(self)
                seen["found"] = episode_records(infos)
                seen["top"] = {key: infos.pop(key) for key in ("episode", "_episode") if key in infos}
            return result

        with proxied(self, "env", "step", keep_records):
            obs, rewards, terminations, truncations, infos = original(self, actions)
        if "snapshot" in seen:
            infos.pop(self._stats_key, None)
            infos.pop(f"_{self._stats_key}", None)
            infos.update(seen["top"])
            records = []
            if seen["found"] is not None:
                indices, episode = seen["found"]
                if self._stats_key != "episode":
                    infos[self._stats_key] = episode
                    infos[f"_{self._stats_key}"] = np.isin(np.arange(self.num_envs), indices)
                r, length, t = (np.asarray(episode[key])[indices].tolist() for key in ("r", "l", "t"))
                records = list(zip(r, length, t, strict=True))
            _restore(self, seen["snapshot"], records)
        return obs, rewards, terminations, truncations, infos

    return marked(step)


def _video_step(original):
    @functools.wraps(original)
    def step(self, action):
        result = original(self, action)
        if wraps_kit_env(self, reports_true_scores):
            _, _, terminated, truncated, info = result
            # the kit's episodic-life rule: an end without the game's record is a life lost, not a game over
            self.__dict__[CONTINUES_ATTR] = bool(terminated) and not truncated and "episode" not in info
        return result

    return marked(step)


def _video_reset(original):
    """gymnasium's own ``reset``, except where a kit game continues after a life loss: then the env below is
    reset and the frame captured without it (its ``reset`` counts an episode, stops an endless clip and may
    start a new one, and has no step the kit could keep: the one place the kit does not call the method it
    wraps; the guard checks the names used)."""

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

    return marked(reset)


_GYMNASIUM = ("gymnasium", ("1.2", "1.5"))
_LOSES = (
    "gymnasium's {} around a kit env reports per-life clipped scores, not the kit's true game scores (and "
    "fails at a game end with its default key)"
)

#: the core's own adapters (gymnasium is the core's dependency), by the module that defines each class
ADAPTERS = {
    "gymnasium.wrappers.common": Adapter(
        *_GYMNASIUM,
        requires=(
            "RecordEpisodeStatistics.step",
            *(
                f"RecordEpisodeStatistics().{name}"
                for name in ("env", "_stats_key", "episode_count", *_QUEUES)
            ),
        ),
        loses=_LOSES.format("RecordEpisodeStatistics"),
        patches=lambda module: [(module.RecordEpisodeStatistics, "step", _single_step)],
    ),
    "gymnasium.wrappers.vector.common": Adapter(
        *_GYMNASIUM,
        requires=(
            "RecordEpisodeStatistics.step",
            *(
                f"RecordEpisodeStatistics().{name}"
                for name in ("env", "_stats_key", "episode_count", "num_envs", *_QUEUES)
            ),
        ),
        loses=_LOSES.format("vector RecordEpisodeStatistics"),
        patches=lambda module: [(module.RecordEpisodeStatistics, "step", _vector_step)],
    ),
    "gymnasium.wrappers.rendering": Adapter(
        *_GYMNASIUM,
        requires=(
            "RecordVideo.step",
            "RecordVideo.reset",
            "RecordVideo._capture_frame",
            "RecordVideo.stop_recording",
            "RecordVideo().recording",
            "RecordVideo().recorded_frames",
            "RecordVideo().video_length",
        ),
        loses="gymnasium's RecordVideo around a kit env counts lives, not games, and cuts clips at life "
        "losses",
        patches=lambda module: [
            (module.RecordVideo, "reset", _video_reset),
            (module.RecordVideo, "step", _video_step),
        ],
    ),
}
