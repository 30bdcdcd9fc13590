"""The stable-retro backend: builds the baselines-retro-style stack around one stable-retro ``RetroEnv``.

stable-retro can hold only one emulator per process. This module tracks the emulator it created in this
process; while that one is open, a further env is hosted in a worker process behind the same ``gym.Env``
interface (:class:`retro_atari_kit.envs.retro_worker.RetroWorkerEnv`), so any number of envs can be made
in one process. The only module-level state is that tracking.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import gymnasium as gym

from retro_atari_kit.catalog.ale import SCORE_CROP_BOXES
from retro_atari_kit.catalog.retro import RetroGame, retro_game, system_buttons
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
from retro_atari_kit.envs._render import (
    EMULATOR_FPS,
    check_window,
    stack_metadata,
    with_window,
    without_window,
)
from retro_atari_kit.envs._validate import Box, CheckedCalls, check_choice, check_int
from retro_atari_kit.envs.retro_worker import RetroWorkerEnv
from retro_atari_kit.roms import ensure_rom
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

# 4500 agent steps x 4 frames = 18,000 frames = 5 minutes of play at 60 fps (baselines' retro default).
DEFAULT_MAX_EPISODE_STEPS = 4500

# Atari 2600 games run by stable-retro's Stella core show the same 210x160 screen as ALE, so ALE's
# score-crop boxes apply to them.
RETRO_SCORE_CROP_BOXES = {f"{name}-Atari2600": box for name, box in SCORE_CROP_BOXES.items()}


def _check_action_set(name: str, value: Any, target: Target) -> Any:
    """``"discrete"`` stays; a named set becomes its combos; combos are checked against the console."""
    if isinstance(value, str):
        check_choice(name, value, ["discrete", *ACTION_SETS])
        if value == "discrete":
            return value
        value = ACTION_SETS[value]
    elif not isinstance(value, (list, tuple)):
        raise TypeError(
            f"action_set must be 'discrete', one of {', '.join(map(repr, ACTION_SETS))} or a list of button "
            f"combos such as [['LEFT'], ['RIGHT', 'B']], got {value!r}"
        )
    system = retro_game(target.game).system
    combo_masks(value, system_buttons(system), system)
    return value


def _check_state(_name: str, value: Any, target: Target) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"state must be a save-state name (str) or None, got {value!r}")
    states = retro_game(target.game).states()
    if value not in states:
        raise ValueError(
            f"{target.env_id}: unknown state {value!r}; available: {', '.join(states) or 'none'} "
            "(None = the game's default state)"
        )
    return value


# -- the options only the stable-retro stack has (the shared ones are in envs/_options.py) ------------------
STICKY_ACTIONS = sticky_actions_option(
    0.25, "probability that the first frame of a step keeps the previous action"
)
MAX_EPISODE_STEPS = max_episode_steps_option(
    DEFAULT_MAX_EPISODE_STEPS, "agent steps per game (4500 = 5 minutes at 60 fps); None: no limit"
)
ACTION_SET = EnvOption(
    "action_set",
    "discrete",
    "'discrete' (stable-retro's), 'sonic', 'fighting' or a list of button combos such as [['LEFT'], ['B']]",
    _check_action_set,
)
STATE = EnvOption(
    "state", None, "save-state name such as 'Start'; None: the game's default state", _check_state
)
PLAYERS = EnvOption(
    "players",
    1,
    "players controlled (an int >= 1); the action space becomes Discrete(n ** players)",
    lambda name, value, _t: check_int(name, value, 1),
)

# the keyword-only parameters of make_retro_env, in this order
RETRO_OPTIONS: tuple[EnvOption, ...] = (
    FRAME_SKIP,
    STICKY_ACTIONS,
    MAX_EPISODE_STEPS,
    ACTION_SET,
    STATE,
    PLAYERS,
    CLIP_REWARD,
    FRAME_STACK,
    SCREEN_SIZE,
    GRAYSCALE,
    CROP_SCORE,
    RENDER_MODE,
)
DEFAULTS: dict[str, Any] = defaults_of(
    RETRO_OPTIONS
)  # derived from RETRO_OPTIONS, for readers of a plain dict


_live_env: weakref.ref | None = None  # the RetroEnv this process holds, if any


def _emulator_alive() -> bool:
    env = _live_env() if _live_env is not None else None
    return env is not None and hasattr(env, "em")


def _emulator_free() -> bool:
    if _emulator_alive():
        gc.collect()  # an env dropped without close() is freed here, as stable-retro itself does
    return not _emulator_alive()


def _env_id(game: str) -> str:
    return retro_game(game).env_id


def validate_retro_kwargs(game: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and validate without starting an emulator; returns the resolved kwargs (``crop_score``
    as a box or None, ``action_set`` as ``"discrete"`` or a list of combos checked against the console)."""
    return resolve_options(RETRO_OPTIONS, Target(_env_id(game), game, RETRO_SCORE_CROP_BOXES), kwargs)


@takes_options(RETRO_OPTIONS, _env_id)
def make_retro_env(
    game: str,
    *,
    frame_skip: int = FRAME_SKIP.default,
    sticky_actions: float = STICKY_ACTIONS.default,
    max_episode_steps: int | None = MAX_EPISODE_STEPS.default,
    action_set: str | Sequence[Sequence[str]] = ACTION_SET.default,
    state: str | None = STATE.default,
    players: int = PLAYERS.default,
    clip_reward: bool = CLIP_REWARD.default,
    frame_stack: int = FRAME_STACK.default,
    screen_size: int = SCREEN_SIZE.default,
    grayscale: bool = GRAYSCALE.default,
    crop_score: bool | Box | None = CROP_SCORE.default,
    render_mode: Literal["rgb_array", "human"] | None = RENDER_MODE.default,
) -> gym.Env:
    """Build ``RetroKit/<game>-v0`` (``game`` such as ``"Pong-Atari2600"``) around one stable-retro emulator.

    Order, innermost first: stable-retro ``RetroEnv`` (``render_mode=None``) -> action set (stable-retro's
    discrete actions, a named combo set or user combos) -> stochastic frame skip -> time limit
    (``max_episode_steps`` agent steps, default 4500) -> true-score statistics -> warp -> reward clip ->
    frame stack -> action and seed checks. See docs/retro.md. Installs ale-py's matching Atari 2600 ROM on
    first use; raises :class:`retro_atari_kit.roms.RomNotFoundError` when the ROM is missing. When this
    process already has an emulator, the same stack is built in a worker process (:class:`RetroWorkerEnv`).
    ``render_mode="human"``: that stack with ``"rgb_array"``, shown in a window of this process (never
    stable-retro's own window; see :mod:`retro_atari_kit.envs._render`).

    Args:
        game: stable-retro's game name, ``Name-System`` (``retrokit list``).
        frame_skip: emulator frames per agent step (an int >= 1)
        sticky_actions: probability that the first frame of a step keeps the previous action
        max_episode_steps: agent steps per game (4500 = 5 minutes at 60 fps); None: no limit
        action_set: 'discrete' (stable-retro's), 'sonic', 'fighting' or a list of button combos such as
            [['LEFT'], ['B']]
        state: save-state name such as 'Start'; None: the game's default state
        players: players controlled (an int >= 1); the action space becomes Discrete(n ** players)
        clip_reward: rewards clipped to their sign (the true score is still reported)
        frame_stack: frames stacked on the channel axis (an int >= 1); 1 gives (1, 84, 84)
        screen_size: side of the square observation, in pixels (an int >= 8)
        grayscale: False keeps RGB: channel-first (3 * frame_stack, H, W)
        crop_score: False: no crop; True: the game's score box from the catalog; or a box (top, bottom,
            left, right) of the full screen to keep
        render_mode: None, 'rgb_array' (render() returns the full-colour frame) or 'human' (a window)

    Raises:
        TypeError, ValueError: one line naming the bad or unknown option and what is allowed.
    """
    global _live_env
    options = {
        k: v for k, v in locals().items() if k != "game"
    }  # the options as given: nothing else bound yet

    info: RetroGame = retro_game(game)
    cfg = validate_retro_kwargs(game, options)  # bad kwargs and missing ROMs raise here, in this process
    if cfg["render_mode"] == "human":
        check_window(info.env_id)  # before the emulator starts (see _render)
        return with_window(make_retro_env(game, **without_window(options)), info.env_id)
    ensure_rom(info)
    if not _emulator_free():
        return _in_worker(game, options, info.env_id)

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
            return _in_worker(game, options, info.env_id)
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
    return RetroWorkerEnv(make_retro_env, game, kwargs, env_id)
