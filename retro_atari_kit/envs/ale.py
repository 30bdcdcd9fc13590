"""The ALE backend: builds the DeepMind-style stack around one ale-py ``AtariEnv``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from retro_atari_kit.catalog import SCORE_CROP_BOXES, ale_game
from retro_atari_kit.envs._quiet import quiet_ale_banner
from retro_atari_kit.envs._render import (
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
    ClipReward,
    EpisodicLife,
    FireReset,
    FrameStack,
    MaxAndSkip,
    NoopReset,
    TrueScoreStatistics,
    WarpFrame,
)
from retro_atari_kit.wrappers.fire_reset import fire_reset_enabled
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK

# ALE's own cap: 108,000 emulator frames = 30 minutes of play; ending there is a real (truncated) game end.
MAX_FRAMES_PER_EPISODE = 108_000

DEFAULTS: dict[str, Any] = {
    "frame_skip": 4,
    "noop_max": 30,
    "terminal_on_life_loss": True,
    "fire_reset": "auto",
    "clip_reward": True,
    "frame_stack": DEFAULT_FRAME_STACK,
    "screen_size": 84,
    "grayscale": True,
    "crop_score": False,
    "sticky_actions": 0.0,
    "full_action_space": False,
    "max_episode_steps": None,
    "render_mode": None,
}


def validate_ale_kwargs(game: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and validate; returns the resolved kwargs (``crop_score`` resolved to a box or None)."""
    env_id = ale_game(game).env_id
    reject_unknown(env_id, kwargs, DEFAULTS)
    cfg = {**DEFAULTS, **kwargs}
    check_int("frame_skip", cfg["frame_skip"], 1)
    check_int("noop_max", cfg["noop_max"], 0)
    check_bool("terminal_on_life_loss", cfg["terminal_on_life_loss"])
    check_choice("fire_reset", cfg["fire_reset"], ["auto", True, False])
    check_bool("clip_reward", cfg["clip_reward"])
    check_int("frame_stack", cfg["frame_stack"], 1)
    check_int("screen_size", cfg["screen_size"], 8)
    check_bool("grayscale", cfg["grayscale"])
    cfg["crop_score"] = resolve_crop(cfg["crop_score"], game, SCORE_CROP_BOXES, env_id)
    cfg["sticky_actions"] = check_probability("sticky_actions", cfg["sticky_actions"])
    check_bool("full_action_space", cfg["full_action_space"])
    check_optional_int("max_episode_steps", cfg["max_episode_steps"], 1)
    check_render_mode(env_id, cfg["render_mode"])
    return cfg


def make_ale_env(game: str, **kwargs: Any) -> gym.Env:
    """Build ``RetroKit/<game>-v0``: the ALE env wrapped in the kit's stack (see docs/envs.md).

    Order, innermost first: ALE (frameskip 1, 108k-frame cap) -> no-op reset -> max-and-skip ->
    time limit (``max_episode_steps`` agent steps, if set) -> true-score statistics -> episodic life ->
    fire reset -> warp -> reward clip -> frame stack -> the action and seed check. ``render_mode``: None,
    ``"rgb_array"`` or ``"human"`` (that stack with ``"rgb_array"``, shown in a window; see
    :mod:`retro_atari_kit.envs._render`).
    """
    from ale_py import AtariEnv

    cfg = validate_ale_kwargs(game, kwargs)
    if cfg["render_mode"] == "human":
        check_window(ale_game(game).env_id)  # no pygame or no display: one line, before the emulator starts
        return with_window(make_ale_env(game, **without_window(kwargs)), ale_game(game).env_id)
    quiet_ale_banner()
    rom = ale_game(game).rom
    env: gym.Env = AtariEnv(
        game=rom,
        obs_type="rgb",
        frameskip=1,
        repeat_action_probability=cfg["sticky_actions"],
        full_action_space=cfg["full_action_space"],
        max_num_frames_per_episode=MAX_FRAMES_PER_EPISODE,
        render_mode=cfg["render_mode"],
    )
    env = NoopReset(env, noop_max=cfg["noop_max"])
    env = MaxAndSkip(env, skip=cfg["frame_skip"])
    if cfg["max_episode_steps"] is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=cfg["max_episode_steps"])
    env = TrueScoreStatistics(env)
    if cfg["terminal_on_life_loss"]:
        env = EpisodicLife(env)
    if fire_reset_enabled(env.unwrapped.get_action_meanings(), cfg["fire_reset"]):
        env = FireReset(env)
    env = WarpFrame(env, size=cfg["screen_size"], grayscale=cfg["grayscale"], crop=cfg["crop_score"])
    if cfg["clip_reward"]:
        env = ClipReward(env)
    env = FrameStack(env, k=cfg["frame_stack"])
    env.metadata = stack_metadata(env.metadata, cfg["frame_skip"])  # declare only the modes that work
    return CheckedCalls(env)  # actions and seeds checked before any layer runs (docs/vectorization.md)
