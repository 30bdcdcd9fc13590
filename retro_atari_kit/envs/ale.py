"""The ALE backend: builds the DeepMind-style stack around one ale-py ``AtariEnv``."""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym

from retro_atari_kit.catalog import SCORE_CROP_BOXES, ale_game
from retro_atari_kit.envs._options import (
    CLIP_REWARD,
    CROP_SCORE,
    FRAME_SKIP,
    FRAME_STACK,
    GRAYSCALE,
    RENDER_MODE,
    SCREEN_SIZE,
    EnvOption,
    Target,
    defaults_of,
    max_episode_steps_option,
    resolve_options,
    sticky_actions_option,
    takes_options,
)
from retro_atari_kit.envs._quiet import quiet_ale_banner
from retro_atari_kit.envs._render import check_window, stack_metadata, with_window, without_window
from retro_atari_kit.envs._validate import Box, CheckedCalls, check_bool, check_choice, check_int
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

# ALE's own cap: 108,000 emulator frames = 30 minutes of play; ending there is a real (truncated) game end.
MAX_FRAMES_PER_EPISODE = 108_000

# -- the options only the ALE stack has (the shared ones are in envs/_options.py) ---------------------------
NOOP_MAX = EnvOption(
    "noop_max",
    30,
    "at most this many random NOOPs after each game reset (an int >= 0); 0 disables",
    lambda name, value, _t: check_int(name, value, 0),
)
TERMINAL_ON_LIFE_LOSS = EnvOption(
    "terminal_on_life_loss",
    True,
    "a life loss ends the training episode (the game goes on)",
    lambda name, value, _t: check_bool(name, value),
)
FIRE_RESET = EnvOption(
    "fire_reset",
    "auto",
    "'auto': press FIRE after each reset if the game has FIRE; True / False force it",
    lambda name, value, _t: check_choice(name, value, ["auto", True, False]),
)
STICKY_ACTIONS = sticky_actions_option(
    0.0, "probability of repeating the previous action, per frame (0.25 is ALE v5 / Machado et al.)"
)
FULL_ACTION_SPACE = EnvOption(
    "full_action_space",
    False,
    "all 18 actions instead of the game's minimal set",
    lambda name, value, _t: check_bool(name, value),
)
MAX_EPISODE_STEPS = max_episode_steps_option(
    None, "agent steps per game, a limit inside the stack (None: ALE's 108,000-frame cap only)"
)

# the keyword-only parameters of make_ale_env, in this order
ALE_OPTIONS: tuple[EnvOption, ...] = (
    FRAME_SKIP,
    NOOP_MAX,
    TERMINAL_ON_LIFE_LOSS,
    FIRE_RESET,
    CLIP_REWARD,
    FRAME_STACK,
    SCREEN_SIZE,
    GRAYSCALE,
    CROP_SCORE,
    STICKY_ACTIONS,
    FULL_ACTION_SPACE,
    MAX_EPISODE_STEPS,
    RENDER_MODE,
)
DEFAULTS: dict[str, Any] = defaults_of(ALE_OPTIONS)  # derived from ALE_OPTIONS, for readers of a plain dict


def _env_id(game: str) -> str:
    return ale_game(game).env_id


def validate_ale_kwargs(game: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and validate; returns the resolved kwargs (``crop_score`` resolved to a box or None)."""
    return resolve_options(ALE_OPTIONS, Target(_env_id(game), game, SCORE_CROP_BOXES), kwargs)


@takes_options(ALE_OPTIONS, _env_id)
def make_ale_env(
    game: str,
    *,
    frame_skip: int = FRAME_SKIP.default,
    noop_max: int = NOOP_MAX.default,
    terminal_on_life_loss: bool = TERMINAL_ON_LIFE_LOSS.default,
    fire_reset: bool | Literal["auto"] = FIRE_RESET.default,
    clip_reward: bool = CLIP_REWARD.default,
    frame_stack: int = FRAME_STACK.default,
    screen_size: int = SCREEN_SIZE.default,
    grayscale: bool = GRAYSCALE.default,
    crop_score: bool | Box | None = CROP_SCORE.default,
    sticky_actions: float = STICKY_ACTIONS.default,
    full_action_space: bool = FULL_ACTION_SPACE.default,
    max_episode_steps: int | None = MAX_EPISODE_STEPS.default,
    render_mode: Literal["rgb_array", "human"] | None = RENDER_MODE.default,
) -> gym.Env:
    """Build ``RetroKit/<game>-v0``: the ALE env wrapped in the kit's stack (see docs/envs.md).

    Order, innermost first: ALE (frameskip 1, 108k-frame cap) -> no-op reset -> max-and-skip ->
    time limit (``max_episode_steps`` agent steps, if set) -> true-score statistics -> episodic life ->
    fire reset -> warp -> reward clip -> frame stack -> the action and seed check. ``render_mode="human"``
    is that stack with ``"rgb_array"``, shown in a window (see :mod:`retro_atari_kit.envs._render`).

    Args:
        game: ALE's CamelCase game name, e.g. ``"Pong"`` (``retrokit list --system atari2600``).
        frame_skip: emulator frames per agent step (an int >= 1)
        noop_max: at most this many random NOOPs after each game reset (an int >= 0); 0 disables
        terminal_on_life_loss: a life loss ends the training episode (the game goes on)
        fire_reset: 'auto': press FIRE after each reset if the game has FIRE; True / False force it
        clip_reward: rewards clipped to their sign (the true score is still reported)
        frame_stack: frames stacked on the channel axis (an int >= 1); 1 gives (1, 84, 84)
        screen_size: side of the square observation, in pixels (an int >= 8)
        grayscale: False keeps RGB: channel-first (3 * frame_stack, H, W)
        crop_score: False: no crop; True: the game's score box from the catalog; or a box (top, bottom,
            left, right) of the full screen to keep
        sticky_actions: probability of repeating the previous action, per frame (0.25 is ALE v5 / Machado
            et al.)
        full_action_space: all 18 actions instead of the game's minimal set
        max_episode_steps: agent steps per game, a limit inside the stack (None: ALE's 108,000-frame cap
            only)
        render_mode: None, 'rgb_array' (render() returns the full-colour frame) or 'human' (a window)

    Raises:
        TypeError, ValueError: one line naming the bad or unknown option and what is allowed.
    """
    options = {
        k: v for k, v in locals().items() if k != "game"
    }  # the options as given: nothing else bound yet
    from ale_py import AtariEnv

    cfg = validate_ale_kwargs(game, options)
    if cfg["render_mode"] == "human":
        check_window(ale_game(game).env_id)  # before the emulator starts (see _render)
        return with_window(make_ale_env(game, **without_window(options)), ale_game(game).env_id)
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
