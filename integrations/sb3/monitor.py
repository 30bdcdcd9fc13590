"""SB3's own entry points report the kit's true scores: ``Monitor`` and ``VecMonitor`` pass its record on.

SB3 wraps every env it makes in ``Monitor`` (``PPO("CnnPolicy", "RetroKit/Breakout-v0")``, SB3's
``make_vec_env``, rl-zoo3), and its own warning tells users to wrap evaluation envs in it. Around a kit env a
plain ``Monitor`` would sum the clipped rewards of one life and overwrite the kit's ``info["episode"]`` at
every life loss, so ``ep_rew_mean``, the monitor CSVs and ``evaluate_policy`` would silently report per-life
clipped returns. The adapters below, run by ``retro_atari_kit.adapters`` as soon as SB3 loads the module
(declared as entry points in ``pyproject.toml``; checked first against the SB3 versions and attributes they
were tested with), make ``Monitor`` and ``VecMonitor`` around a kit env record the kit's record instead: one
episode (CSV row, ``info["episode"]``, ``get_episode_rewards()``) per real game, with its true score and
length; nothing at a life loss. Each calls SB3's own method and fixes up
what it produced (it holds the CSV writer back for that call, so a life loss writes no row). Around other
envs they only call SB3's method.
``VecFrameStack`` around kit envs warns once: the kit's envs already stack frames. ``evaluate_policy`` over
the kit's launcher that no ``VecMonitor`` records yet runs over one (adapted as above), so it counts whole
games with their true scores, as it does over envs that SB3's ``Monitor`` records.

Nothing here imports SB3 at module level: the adapters run while SB3 itself is being imported, and get the
module they adapt as their argument.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from retro_atari_kit.adapters import Adapter, marked, proxied
from retro_atari_kit.recorders import KIT_MODE_ATTR, are_kit_specs, wraps_kit_env
from retro_atari_kit.wrappers.true_score import reports_true_scores


def launched_by_the_kit(venv: Any) -> bool:
    """Whether an SB3 ``VecEnv`` is, or wraps, the kit's launcher (``make_vec_env`` of this integration)."""
    env = venv
    while env is not None:
        if getattr(type(env), "reports_true_scores", False):
            return True
        env = getattr(env, "venv", None)
    return False


def vec_env_reports_true_scores(venv: Any) -> bool:
    """Whether an SB3 ``VecEnv`` (possibly wrapped) is made of kit envs: the kit's launcher
    (``make_vec_env`` of this integration), or SB3's ``DummyVecEnv`` / ``SubprocVecEnv`` over kit envs."""
    if launched_by_the_kit(venv):
        return True
    env = venv
    while getattr(env, "venv", None) is not None:
        env = env.venv
    envs = getattr(env, "envs", None)
    if isinstance(envs, list):
        return bool(envs) and all(reports_true_scores(sub) for sub in envs)
    try:  # envs in other processes: their specs tell
        specs = env.get_attr("spec")
    except Exception:
        return False
    return are_kit_specs(specs)


def _monitor_step(original):
    """SB3's own ``Monitor.step`` runs, its CSV writer held back; around a kit env the kit's record then
    replaces the per-life clipped episode it made (a life loss leaves none), and the row is written."""

    @functools.wraps(original)
    def step(self, action):
        if not wraps_kit_env(self, reports_true_scores):
            return original(self, action)
        seen: dict[str, Any] = {}

        def keep_record(result):
            seen["record"] = result[4].get("episode")  # before Monitor overwrites it
            return result

        writer, recorded = self.results_writer, len(self.episode_returns)
        self.results_writer = None
        try:
            with proxied(self, "env", "step", keep_record):
                observation, reward, terminated, truncated, info = original(self, action)
        finally:
            self.results_writer = writer
        if len(self.episode_returns) == recorded:  # no episode end: nothing recorded
            return observation, reward, terminated, truncated, info
        # SB3 recorded one life's clipped returns; a life loss ends SB3's episode (it resets, the kit goes on
        # with the game), a game over is recorded with the kit's true score and length
        del self.episode_returns[-1], self.episode_lengths[-1]
        elapsed = self.episode_times.pop()
        ep_info = info.pop("episode")
        record = seen.get("record")
        if record is None:
            return observation, reward, terminated, truncated, info
        ep_info.update(r=round(float(record["r"]), 6), l=int(record["l"]))
        self.episode_returns.append(float(record["r"]))
        self.episode_lengths.append(int(record["l"]))
        self.episode_times.append(elapsed)
        if writer:
            writer.write_row(ep_info)
        info["episode"] = ep_info
        return observation, reward, terminated, truncated, info

    return marked(step)


def _vec_monitor_init(original):
    @functools.wraps(original)
    def __init__(self, venv, *args, **kwargs):
        original(self, venv, *args, **kwargs)
        # decided here: once steps are in flight, asking worker processes would read their step replies
        self.__dict__[KIT_MODE_ATTR] = vec_env_reports_true_scores(venv)

    return marked(__init__)


def _vec_monitor_step_wait(original):
    """SB3's own ``VecMonitor.step_wait`` runs, its CSV writer held back; over kit envs the kit's records
    then replace the per-life clipped episodes it made (life losses leave none), and the rows are written."""

    @functools.wraps(original)
    def step_wait(self):
        if not self.__dict__.get(KIT_MODE_ATTR, False):
            return original(self)
        seen: dict[str, Any] = {}

        def keep_records(result):
            seen["records"] = [info.get("episode") for info in result[3]]  # VecMonitor replaces them
            return result

        writer = self.results_writer
        self.results_writer = None
        try:
            with proxied(self, "venv", "step_wait", keep_records):
                obs, rewards, dones, infos = original(self)
        finally:
            self.results_writer = writer
        for i in np.flatnonzero(dones):
            record, info = seen["records"][i], infos[i]  # info: VecMonitor's copy, with its own record
            if record is None:  # a life loss: the game goes on
                info.pop("episode", None)
                self.episode_count -= 1
                continue
            info["episode"].update(r=float(record["r"]), l=int(record["l"]))
            if writer:
                writer.write_row(info["episode"])
        return obs, rewards, dones, infos

    return marked(step_wait)


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

    return marked(__init__)


def _evaluate_policy(original):
    """SB3's own ``evaluate_policy``; over the kit's launcher that no ``VecMonitor`` records, it runs over one
    (adapted above), which it takes as its sign to count the kit's whole games with their true scores
    instead of the per-life clipped episodes of the raw ``dones`` and rewards. Any other env, a kit env
    from ``gym.make`` included, is left to SB3 (its warning recommends ``Monitor``)."""

    @functools.wraps(original)
    def evaluate_policy(model, env, *args, **kwargs):
        from stable_baselines3.common.vec_env import VecMonitor, is_vecenv_wrapped

        if launched_by_the_kit(env) and not is_vecenv_wrapped(env, VecMonitor):
            env = VecMonitor(env)
        return original(model, env, *args, **kwargs)

    return marked(evaluate_policy)


_SB3 = ("stable-baselines3", ("2.7", "2.10"))
_LOSES = (
    "SB3's {} around kit envs records per-life clipped returns, not the kit's true game scores (monitor "
    "CSVs, ep_rew_mean, evaluate_policy)"
)

#: ``stable_baselines3.common.monitor`` (entry point in pyproject.toml)
MONITOR = Adapter(
    *_SB3,
    requires=(
        "Monitor.step",
        *(
            f"Monitor().{name}"
            for name in ("env", "results_writer", "episode_returns", "episode_lengths", "episode_times")
        ),
    ),
    loses=_LOSES.format("Monitor"),
    patches=lambda module: [(module.Monitor, "step", _monitor_step)],
)

#: ``stable_baselines3.common.vec_env.vec_monitor``
VEC_MONITOR = Adapter(
    *_SB3,
    requires=(
        "VecMonitor.__init__",
        "VecMonitor.step_wait",
        *(f"VecMonitor().{name}" for name in ("venv", "results_writer", "episode_count")),
    ),
    loses=_LOSES.format("VecMonitor"),
    patches=lambda module: [
        (module.VecMonitor, "__init__", _vec_monitor_init),
        (module.VecMonitor, "step_wait", _vec_monitor_step_wait),
    ],
)

#: ``stable_baselines3.common.evaluation`` (a function of the module, not a class: nothing else to require)
EVALUATION = Adapter(
    *_SB3,
    requires=(),
    loses="SB3's evaluate_policy over kit envs counts per-life clipped episodes, not the kit's true scores",
    patches=lambda module: [(module, "evaluate_policy", _evaluate_policy)],
)

#: ``stable_baselines3.common.vec_env.vec_frame_stack``
VEC_FRAME_STACK = Adapter(
    *_SB3,
    requires=("VecFrameStack.__init__", "VecFrameStack().observation_space"),
    loses="VecFrameStack over kit envs stacks their stacked frames again without a warning",
    patches=lambda module: [(module.VecFrameStack, "__init__", _frame_stack_init)],
)
