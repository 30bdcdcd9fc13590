"""The stable-retro backend: builds the baselines-retro-style stack around one stable-retro ``RetroEnv``.

stable-retro can hold only one emulator per process. This module tracks the emulator it created in this
process; while that one is open, a further env is hosted in a worker process behind the same ``gym.Env``
interface (:class:`retro_atari_kit.envs.retro_worker.RetroWorkerEnv`), so any number of envs can be made
in one process. The only module-level state is that tracking.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import gymnasium as gym

from retro_atari_kit.catalog.ale import SCORE_CROP_BOXES
from retro_atari_kit.catalog.retro import RetroGame, retro_game, system_buttons
from retro_atari_kit.envs._render import (
    EMULATOR_FPS,
    check_render_mode,
    check_window,
    stack_metadata,
    with_window,
    without_window,
)
from retro_atari_kit.envs._validate import (
    CheckedCalls,
    check_bool,
    check_choice,
    check_int,
    check_optional_int,
    check_probability,
    reject_unknown,
    resolve_crop,
)
from retro_atari_kit.wrappers import (
    ACTION_SETS,
    ClipReward,
    DiscreteActions,
    FrameStack,
    StochasticFrameSkip,
    TrueScoreStatistics,
    WarpFrame,
)
from retro_atari_kit.wrappers.discrete_actions import combo_masks
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK

# 4500 agent steps x 4 frames = 18,000 frames = 5 minutes of play at 60 fps (baselines' retro default).
DEFAULT_MAX_EPISODE_STEPS = 4500

DEFAULTS: dict[str, Any] = {
    "frame_skip": 4,
    "sticky_actions": 0.25,
    "max_episode_steps": DEFAULT_MAX_EPISODE_STEPS,
    "action_set": "discrete",
    "state": None,
    "players": 1,
    "clip_reward": True,
    "frame_stack": DEFAULT_FRAME_STACK,
    "screen_size": 84,
    "grayscale": True,
    "crop_score": False,
    "render_mode": None,
}

# Atari 2600 games run by stable-retro's Stella core show the same 210x160 screen as ALE, so ALE's
# score-crop boxes apply to them.
RETRO_SCORE_CROP_BOXES = {f"{name}-Atari2600": box for name, box in SCORE_CROP_BOXES.items()}


_live_env: weakref.ref | None = None  # the RetroEnv this process holds, if any


def _emulator_alive() -> bool:
    env = _live_env() if _live_env is not None else None
    return env is not None and hasattr(env, "em")


def _emulator_free() -> bool:
    if _emulator_alive():
        gc.collect()  # an env dropped without close() is freed here, as stable-retro itself does
    return not _emulator_alive()


def validate_retro_kwargs(game: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and validate without starting an emulator; returns the resolved kwargs (``crop_score``
    as a box or None, ``action_set`` as ``"discrete"`` or a list of combos checked against the console)."""
    env_id = retro_game(game).env_id
    reject_unknown(env_id, kwargs, DEFAULTS)
    cfg = {**DEFAULTS, **kwargs}
    check_int("frame_skip", cfg["frame_skip"], 1)
    cfg["sticky_actions"] = check_probability("sticky_actions", cfg["sticky_actions"])
    check_optional_int("max_episode_steps", cfg["max_episode_steps"], 1)
    check_int("players", cfg["players"], 1)
    check_bool("clip_reward", cfg["clip_reward"])
    check_int("frame_stack", cfg["frame_stack"], 1)
    check_int("screen_size", cfg["screen_size"], 8)
    check_bool("grayscale", cfg["grayscale"])
    cfg["crop_score"] = resolve_crop(cfg["crop_score"], game, RETRO_SCORE_CROP_BOXES, env_id)
    check_render_mode(env_id, cfg["render_mode"])
    action_set = cfg["action_set"]
    if isinstance(action_set, str):
        check_choice("action_set", action_set, ["discrete", *ACTION_SETS])
        if action_set != "discrete":
            cfg["action_set"] = ACTION_SETS[action_set]
    elif not isinstance(action_set, (list, tuple)):
        raise TypeError(
            f"action_set must be 'discrete', one of {', '.join(map(repr, ACTION_SETS))} or a list of button "
            f"combos such as [['LEFT'], ['RIGHT', 'B']], got {action_set!r}"
        )
    if cfg["action_set"] != "discrete":
        system = retro_game(game).system
        combo_masks(cfg["action_set"], system_buttons(system), system)
    state = cfg["state"]
    if state is not None:
        if not isinstance(state, str):
            raise TypeError(f"state must be a save-state name (str) or None, got {state!r}")
        states = retro_game(game).states()
        if state not in states:
            raise ValueError(
                f"{env_id}: unknown state {state!r}; available: {', '.join(states) or 'none'} "
                "(None = the game's default state)"
            )
    return cfg


def make_retro_env(game: str, **kwargs: Any) -> gym.Env:
    """Build ``RetroKit/<game>-v0`` (``game`` such as ``"Pong-Atari2600"``) around one stable-retro emulator.

    Order, innermost first: stable-retro ``RetroEnv`` (``render_mode=None``) -> action set (stable-retro's
    discrete actions, a named combo set or user combos) -> stochastic frame skip -> time limit
    (``max_episode_steps`` agent steps, default 4500) -> true-score statistics -> warp -> reward clip ->
    frame stack -> action and seed checks. See docs/retro.md. Installs ale-py's matching Atari 2600 ROM on
    first use; raises :class:`retro_atari_kit.roms.RomNotFoundError` when the ROM is missing. When this
    process already has an emulator, the same stack is built in a worker process (:class:`RetroWorkerEnv`).
    ``render_mode="human"``: that stack with ``"rgb_array"``, shown in a window of this process (never
    stable-retro's own window; see :mod:`retro_atari_kit.envs._render`).
    """
    global _live_env
    from retro_atari_kit.roms import ensure_rom

    info: RetroGame = retro_game(game)
    cfg = validate_retro_kwargs(game, kwargs)  # bad kwargs and missing ROMs raise here, in this process
    if cfg["render_mode"] == "human":
        check_window(info.env_id)  # no pygame or no display: one line, before the emulator starts
        return with_window(make_retro_env(game, **without_window(kwargs)), info.env_id)
    ensure_rom(info)
    if not _emulator_free():
        return _in_worker(game, kwargs, info.env_id)

    import stable_retro

    inttype = {
        "stable": stable_retro.data.Integrations.STABLE,
        "contrib": stable_retro.data.Integrations.CONTRIB_ONLY,
        "experimental": stable_retro.data.Integrations.EXPERIMENTAL_ONLY,
    }[info.integration]
    discrete = cfg["action_set"] == "discrete"
    try:
        retro_env = stable_retro.RetroEnv(
            info.folder,
            state=cfg["state"] if cfg["state"] is not None else stable_retro.State.DEFAULT,
            use_restricted_actions=stable_retro.Actions.DISCRETE if discrete else stable_retro.Actions.ALL,
            players=cfg["players"],
            inttype=inttype,
            render_mode=cfg["render_mode"],
        )
    except RuntimeError as exc:
        if "multiple emulator" in str(exc):  # an emulator created outside retro-atari-kit holds the process
            return _in_worker(game, kwargs, info.env_id)
        raise
    _live_env = weakref.ref(retro_env)
    # stable-retro declares its fps under the pre-gymnasium key only; checkers of the bare emulator
    # (check_env(env.unwrapped)) read render_fps
    retro_env.metadata = {**retro_env.metadata, "render_fps": EMULATOR_FPS}

    try:
        env: gym.Env = retro_env
        if not discrete:
            env = DiscreteActions(env, cfg["action_set"], players=cfg["players"])
        env = StochasticFrameSkip(env, skip=cfg["frame_skip"], sticky_prob=cfg["sticky_actions"])
        if cfg["max_episode_steps"] is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=cfg["max_episode_steps"])
        env = TrueScoreStatistics(env)
        env = WarpFrame(env, size=cfg["screen_size"], grayscale=cfg["grayscale"], crop=cfg["crop_score"])
        if cfg["clip_reward"]:
            env = ClipReward(env)
        env = FrameStack(env, k=cfg["frame_stack"])
        env.metadata = stack_metadata(env.metadata, cfg["frame_skip"])  # declare only the modes that work
        env = CheckedCalls(env)  # actions and seeds checked before any layer runs (docs/vectorization.md)
    except BaseException:
        retro_env.close()
        raise
    return env


def _in_worker(game: str, kwargs: dict[str, Any], env_id: str) -> gym.Env:
    from retro_atari_kit.envs.retro_worker import RetroWorkerEnv

    return RetroWorkerEnv(game, kwargs, env_id)
