"""SB3's own doors report the kit's true scores: ``Monitor`` and ``VecMonitor`` pass the kit's record on.

SB3 wraps every env it makes in ``Monitor`` (``PPO("CnnPolicy", "RetroKit/Breakout-v0")``, SB3's
``make_vec_env``, rl-zoo3), and its own warning tells users to wrap evaluation envs in it. Around a kit env a
plain ``Monitor`` would sum the clipped rewards of one life and overwrite the kit's ``info["episode"]`` at
every life loss, so ``ep_rew_mean``, the monitor CSVs and ``evaluate_policy`` would silently report per-life
clipped returns. The adapters below, run by ``retro_atari_kit._post_import`` as soon as SB3 loads the module
(declared as entry points in ``pyproject.toml``), make ``Monitor`` and ``VecMonitor`` around a kit env
record the kit's record instead: one episode (CSV row, ``info["episode"]``, ``get_episode_rewards()``) per
real game, with its true score and length; nothing at a life loss. Around other envs they are unchanged.
``VecFrameStack`` around kit envs warns once: the kit's envs already stack frames.

Nothing here imports SB3 at module level: the adapters run while SB3 itself is being imported, and get the
module they adapt as their argument.
"""

from __future__ import annotations

import functools
import time
import warnings
from types import ModuleType
from typing import Any

import numpy as np

from retro_atari_kit.recorders import KIT_MODE_ATTR, are_kit_specs, wraps_kit_env
from retro_atari_kit.wrappers.true_score import reports_true_scores


def vec_env_reports_true_scores(venv: Any) -> bool:
    """Whether an SB3 ``VecEnv`` (possibly wrapped) is made of kit envs: the kit's launcher
    (``make_vec_env`` of this integration), or SB3's ``DummyVecEnv`` / ``SubprocVecEnv`` over kit envs."""
    env = venv
    while True:
        if getattr(type(env), "reports_true_scores", False):
            return True
        inner = getattr(env, "venv", None)
        if inner is None:
            break
        env = inner
    envs = getattr(env, "envs", None)
    if isinstance(envs, list):
        return bool(envs) and all(reports_true_scores(sub) for sub in envs)
    try:  # envs in other processes: their specs tell
        specs = env.get_attr("spec")
    except Exception:
        return False
    return are_kit_specs(specs)


def _monitor_step(original):
    @functools.wraps(original)
    def step(self, action):
        if not wraps_kit_env(self, reports_true_scores):
            return original(self, action)
        if self.needs_reset:
            raise RuntimeError("Tried to step environment that needs reset")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        self.total_steps += 1
        if not (terminated or truncated):
            return observation, reward, terminated, truncated, info
        self.needs_reset = True  # a life loss ends SB3's episode too: SB3 resets, the kit continues the game
        record = info.get("episode")
        if record is None:
            return observation, reward, terminated, truncated, info
        elapsed = time.time() - self.t_start
        ep_info = {"r": round(float(record["r"]), 6), "l": int(record["l"]), "t": round(elapsed, 6)}
        for key in self.info_keywords:
            ep_info[key] = info[key]
        self.episode_returns.append(float(record["r"]))
        self.episode_lengths.append(int(record["l"]))
        self.episode_times.append(elapsed)
        ep_info.update(self.current_reset_info)
        if self.results_writer:
            self.results_writer.write_row(ep_info)
        info["episode"] = ep_info
        return observation, reward, terminated, truncated, info

    step._retrokit = True
    return step


def _vec_monitor_init(original):
    @functools.wraps(original)
    def __init__(self, venv, *args, **kwargs):
        original(self, venv, *args, **kwargs)
        # decided here: once steps are in flight, asking worker processes would read their step replies
        self.__dict__[KIT_MODE_ATTR] = vec_env_reports_true_scores(venv)

    __init__._retrokit = True
    return __init__


def _vec_monitor_step_wait(original):
    @functools.wraps(original)
    def step_wait(self):
        if not self.__dict__.get(KIT_MODE_ATTR, False):
            return original(self)
        obs, rewards, dones, infos = self.venv.step_wait()
        self.episode_returns += rewards
        self.episode_lengths += 1
        new_infos = list(infos)
        for i in np.flatnonzero(dones):
            self.episode_returns[i] = 0
            self.episode_lengths[i] = 0
            record = infos[i].get("episode")
            if record is None:  # a life loss: the game goes on
                continue
            info = dict(infos[i])
            episode_info = {
                "r": float(record["r"]),
                "l": int(record["l"]),
                "t": round(time.time() - self.t_start, 6),
            }
            for key in self.info_keywords:
                episode_info[key] = info[key]
            info["episode"] = episode_info
            self.episode_count += 1
            if self.results_writer:
                self.results_writer.write_row(episode_info)
            new_infos[i] = info
        return obs, rewards, dones, new_infos

    step_wait._retrokit = True
    return step_wait


def _frame_stack_init(original):
    @functools.wraps(original)
    def __init__(self, venv, n_stack: int, *args, **kwargs):
        original(self, venv, n_stack, *args, **kwargs)
        if vec_env_reports_true_scores(venv):
            shape = tuple(self.observation_space.shape)
            warnings.warn(
                f"VecFrameStack over a RetroKit env stacks frames twice (observations {shape}): the kit's "
                "envs already stack 4 frames; remove VecFrameStack (or make the envs with frame_stack=1)",
                UserWarning,
                stacklevel=3,
            )

    __init__._retrokit = True
    return __init__


def _patch(cls: type, name: str, make) -> None:
    if not getattr(getattr(cls, name), "_retrokit", False):
        setattr(cls, name, make(getattr(cls, name)))


def adapt_monitor(module: ModuleType) -> None:
    """``stable_baselines3.common.monitor``: ``Monitor`` around a kit env records true games."""
    _patch(module.Monitor, "step", _monitor_step)


def adapt_vec_monitor(module: ModuleType) -> None:
    """``stable_baselines3.common.vec_env.vec_monitor``: ``VecMonitor`` over kit envs records true games."""
    _patch(module.VecMonitor, "__init__", _vec_monitor_init)
    _patch(module.VecMonitor, "step_wait", _vec_monitor_step_wait)


def adapt_vec_frame_stack(module: ModuleType) -> None:
    """``stable_baselines3.common.vec_env.vec_frame_stack``: warn when it stacks a kit env's stacks."""
    _patch(module.VecFrameStack, "__init__", _frame_stack_init)
