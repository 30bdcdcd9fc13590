"""The observation options every backend's stack takes, defined once: each one's default, check and meaning.

An :class:`EnvOption` is one keyword of ``gym.make("RetroKit/...", ...)``. The options all backends share
with the same default are the constants here (``FRAME_SKIP``, ``FRAME_STACK``, ...); ``sticky_actions`` and
``max_episode_steps`` are shared too, but each backend picks its own default and wording
(:func:`sticky_actions_option`, :func:`max_episode_steps_option`); options only one backend has are defined
in that backend's module in the same form. A backend lists its options in one tuple (``ALE_OPTIONS``,
``RETRO_OPTIONS``), and its factory declares them as keyword-only parameters whose defaults are the options'
``default`` (:func:`takes_options` refuses a factory whose parameters differ from its tuple), so ``help()``
and IDEs show every option with its type and default. The vector backends validate with the same tuple
(``validate_ale_kwargs`` / ``validate_retro_kwargs``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from retro_atari_kit.envs._render import check_render_mode
from retro_atari_kit.envs._validate import (
    Box,
    check_bool,
    check_int,
    check_optional_int,
    check_probability,
    reject_unknown,
    resolve_crop,
)
from retro_atari_kit.limits import check_env_options, memory_errors
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Target:
    """What a check may need to know about the env being built (for its error lines and per-game tables)."""

    env_id: str
    game: str
    crop_boxes: dict[str, Box]


@dataclass(frozen=True)
class EnvOption:
    """One env option: ``check(name, value, target)`` raises one ``TypeError`` / ``ValueError`` line for a
    bad value and returns the value the stack uses (``crop_score=True`` becomes the game's box)."""

    name: str
    default: Any
    meaning: str
    check: Callable[[str, Any, Target], Any]


def _int(minimum: int) -> Callable[[str, Any, Target], int]:
    return lambda name, value, _target: check_int(name, value, minimum)


def _bool(name: str, value: Any, _target: Target) -> bool:
    return check_bool(name, value)


def _crop(_name: str, value: Any, target: Target) -> Box | None:
    return resolve_crop(value, target.game, target.crop_boxes, target.env_id)


def _render_mode(_name: str, value: Any, target: Target) -> str | None:
    check_render_mode(target.env_id, value)
    return value


# -- shared by every backend, same default ------------------------------------------------------------------
FRAME_SKIP = EnvOption("frame_skip", 4, "emulator frames per agent step (an int >= 1)", _int(1))
CLIP_REWARD = EnvOption(
    "clip_reward", True, "rewards clipped to their sign (the true score is still reported)", _bool
)
FRAME_STACK = EnvOption(
    "frame_stack",
    DEFAULT_FRAME_STACK,
    "frames stacked on the channel axis (an int >= 1); 1 gives (1, 84, 84)",
    _int(1),
)
SCREEN_SIZE = EnvOption("screen_size", 84, "side of the square observation, in pixels (an int >= 8)", _int(8))
GRAYSCALE = EnvOption("grayscale", True, "False keeps RGB: channel-first (3 * frame_stack, H, W)", _bool)
CROP_SCORE = EnvOption(
    "crop_score",
    False,
    "False: no crop; True: the game's score box from the catalog; or a box (top, bottom, left, right) of "
    "the full screen to keep",
    _crop,
)
RENDER_MODE = EnvOption(
    "render_mode",
    None,
    "None, 'rgb_array' (render() returns the full-colour frame) or 'human' (a window)",
    _render_mode,
)

COMMON_OPTIONS: tuple[EnvOption, ...] = (
    FRAME_SKIP,
    CLIP_REWARD,
    FRAME_STACK,
    SCREEN_SIZE,
    GRAYSCALE,
    CROP_SCORE,
    RENDER_MODE,
)


# -- shared by every backend, each with its own default -----------------------------------------------------
def sticky_actions_option(default: float, meaning: str) -> EnvOption:
    """``sticky_actions``: a probability in [0, 1]; what exactly repeats is the backend's ``meaning``."""
    return EnvOption(
        "sticky_actions", default, meaning, lambda name, value, _t: check_probability(name, value)
    )


def max_episode_steps_option(default: int | None, meaning: str) -> EnvOption:
    """``max_episode_steps``: None or an int >= 1, a limit in agent steps inside the stack."""
    return EnvOption(
        "max_episode_steps", default, meaning, lambda name, value, _t: check_optional_int(name, value, 1)
    )


def defaults_of(options: Iterable[EnvOption]) -> dict[str, Any]:
    """``{name: default}`` of ``options``, in their order."""
    return {option.name: option.default for option in options}


def resolve_options(options: Sequence[EnvOption], target: Target, given: dict[str, Any]) -> dict[str, Any]:
    """Every option's value for the stack: ``given`` over the defaults, each checked in ``options``' order.

    An unknown name raises :func:`reject_unknown`'s ``TypeError`` line (with a did-you-mean)."""
    reject_unknown(target.env_id, given, [option.name for option in options])
    resolved = {o.name: o.check(o.name, given.get(o.name, o.default), target) for o in options}
    check_env_options(target.env_id, resolved)  # the observation's size against the caps and the memory
    return resolved


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def takes_options(
    options: Sequence[EnvOption], env_id_of: Callable[[str], str]
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a backend's factory ``f(game, *, <one keyword-only parameter per option>)``.

    At definition, the keyword-only parameters must be exactly ``options``, in order, each defaulting to
    its option's default (so the signature and the spec cannot drift). At a call, an unknown keyword gets
    the kit's one-line ``TypeError`` (what Python would say, plus the closest option and the allowed ones)
    instead of Python's bare one; ``env_id_of(game)`` names the env in it (and refuses an unknown game
    first)."""
    names = [option.name for option in options]

    def decorate(factory: Callable[P, R]) -> Callable[P, R]:
        params = inspect.signature(factory).parameters
        declared = {n: p.default for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        expected = defaults_of(options)
        if list(declared) != names or any(not _same(declared[n], expected[n]) for n in names):
            raise TypeError(
                f"{factory.__qualname__}'s keyword-only parameters {declared} differ from its options "
                f"{expected}: declare each option once, defaulting to <OPTION>.default"
            )

        @functools.wraps(factory)
        def with_kit_errors(*args: P.args, **kwargs: P.kwargs) -> R:
            unknown = {k: v for k, v in kwargs.items() if k not in params}
            if unknown:
                game = args[0] if args else kwargs.get("game")
                options_given = {k: v for k, v in kwargs.items() if k in names or k in unknown}
                reject_unknown(env_id_of(game), options_given, names)  # type: ignore[arg-type]
            with memory_errors(f"making {env_id_of(args[0] if args else kwargs.get('game'))}"):
                return factory(*args, **kwargs)

        return with_kit_errors

    return decorate
