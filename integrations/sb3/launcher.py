"""SB3 launcher: ``make_vec_env("RetroKit/Pong-v0", n_envs=8)`` -> an SB3 ``VecEnv`` on the fast backends.

Observations are channel-first uint8 ``(n_envs, 4, 84, 84)``, so SB3 adds no ``VecTransposeImage``.
``info["episode"]`` holds the **true** game score (all lives, unclipped) when a real game ends, so SB3's
``ep_rew_mean`` shows true scores; the same episodes go to ``monitor_dir/<rank>.monitor.csv`` in the
baselines/SB3 format.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

import retro_atari_kit  # noqa: F401  (registers RetroKit/ IDs)
from retro_atari_kit.errors import as_int
from retro_atari_kit.registration import VECTOR_ENTRY_POINT
from retro_atari_kit.runs import MonitorCSV


class KitVecEnv(VecEnv):
    """SB3 ``VecEnv`` over a retro-atari-kit gymnasium ``VectorEnv`` made with ``autoreset_mode=SAME_STEP``.

    SB3 conventions: ``reset()`` returns observations only and uses the seeds set by ``seed()`` (env
    ``rank`` gets ``seed + rank``); ``step`` returns ``(obs, rewards, dones, infos)`` where an env that is
    done is already reset, ``infos[i]["terminal_observation"]`` is its last observation and
    ``infos[i]["TimeLimit.truncated"]`` tells truncation from termination. ``infos[i]["episode"]``
    (``{"r", "l", "t"}``, true score) appears only when the real game ends, not on every life loss.
    """

    reports_true_scores = True  # SB3's VecMonitor around it passes the record on (see .monitor)

    def __init__(self, venv: VectorEnv, env_id: str = "", monitor_dir: str | None = None):
        if venv.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError("KitVecEnv needs a VectorEnv made with autoreset_mode=AutoresetMode.SAME_STEP")
        self.venv = venv
        self.env_id = env_id
        self.monitor: MonitorCSV | None = None
        if monitor_dir is not None:  # all envs step together: each row gets the steps so far (segment_steps)
            self.monitor = MonitorCSV(monitor_dir, env_id, venv.num_envs, segment_steps=True)
        self._steps = 0  # of all envs since this vector env was made: the learner's count since then
        self._actions: np.ndarray | None = None
        self.closed = False
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        # SB3's base class keeps only render_modes; VecVideoRecorder reads render_fps from here (its
        # default, 30, would play the kit's one-frame-per-agent-step videos at twice the real speed)
        if "render_fps" in venv.metadata:
            self.metadata["render_fps"] = venv.metadata["render_fps"]

    @property
    def backend(self) -> str:
        return getattr(self.venv, "backend", type(self.venv).__name__)

    def reset(self) -> np.ndarray:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = self._options[0] if self._options and self._options[0] else None
        obs, _ = self.venv.reset(seed=seeds, options=options)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminations, truncations, info = self.venv.step(self._actions)
        self._steps += self.num_envs
        dones = terminations | truncations
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = info["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(truncations[i] and not terminations[i])
        final_info = info.get("final_info", {})  # SAME_STEP: the ending step's info, under gymnasium's key
        if "_episode" in final_info:
            episode = final_info["episode"]
            for i in np.flatnonzero(final_info["_episode"]):
                stats = {"r": float(episode["r"][i]), "l": int(episode["l"][i]), "t": float(episode["t"][i])}
                infos[i]["episode"] = stats
                if self.monitor is not None:
                    self.monitor.write(int(i), stats["r"], stats["l"], self._steps)
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        """Close the backend (workers joined) and the monitor files. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.venv.close()
        if self.monitor is not None:
            self.monitor.close()

    # -- attribute access on the per-env stacks --------------------------------------------------------
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name == "render_mode":
            return [getattr(self.venv, "render_mode", None) for _ in self._get_indices(indices)]
        values = self.venv.get_attr(attr_name)
        return [values[i] for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        current = list(self.venv.get_attr(attr_name))
        for i in self._get_indices(indices):
            current[i] = value
        self.venv.set_attr(attr_name, current)

    def env_method(
        self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        results = self.venv.call(method_name, *method_args, **method_kwargs)
        return [results[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """False: no env here is wrapped in a gymnasium or SB3 wrapper that SB3 could name (the native backend
        has no per-env ``Env`` at all), ``Monitor`` included. The kit's own true-score record is
        ``info["episode"]``; SB3's ``evaluate_policy`` counts whole games with it through the kit's adapter
        (:mod:`retro_atari_kit.integrations.sb3.monitor`)."""
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return list(self.venv.call("render"))


def make_vec_env(
    env_id: str,
    n_envs: int | None = None,
    seed: int | None = 0,
    backend: str = "auto",
    monitor_dir: str | None = None,
    **env_kwargs: Any,
) -> KitVecEnv:
    """Make an SB3 ``VecEnv`` of ``n_envs`` copies of ``env_id`` (a ``RetroKit/`` ID) on the fastest backend.

    ``n_envs`` defaults to the CPU count (as baselines did). Env ``rank`` is seeded with ``seed + rank`` on
    the first ``reset()`` (``seed=None``: unseeded). ``backend`` is ``"auto"``, ``"native"``,
    ``"subprocess"`` or ``"inprocess"`` (see docs/vectorization.md). With ``monitor_dir``, every finished
    game is appended to ``monitor_dir/<rank>.monitor.csv`` (true score). ``env_kwargs`` go to every env,
    as for ``gym.make`` (``noop_max``, ``frame_stack``, ``sticky_actions``, ...).
    """
    if n_envs is None:
        n_envs = os.cpu_count() or 1
    count = as_int(n_envs)  # numpy integers too
    if count is None or count < 1:
        raise ValueError(f"n_envs must be an int >= 1 or None (= CPU count), got {n_envs!r}")
    n_envs = count
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    spec = gym.spec(env_id)
    if spec.vector_entry_point != VECTOR_ENTRY_POINT:
        raise ValueError(
            f"make_vec_env needs a RetroKit/ env ID (e.g. 'RetroKit/Pong-v0'); {env_id!r} is not one. "
            "For other envs use stable_baselines3.common.env_util.make_vec_env"
        )
    venv = gym.make_vec(
        env_id,
        num_envs=n_envs,
        backend=backend,
        autoreset_mode=AutoresetMode.SAME_STEP,
        **env_kwargs,
    )
    try:
        vec_env = KitVecEnv(venv, env_id=spec.id, monitor_dir=monitor_dir)
    except BaseException:
        venv.close()
        raise
    if seed is not None:
        vec_env.seed(int(seed))
    return vec_env
