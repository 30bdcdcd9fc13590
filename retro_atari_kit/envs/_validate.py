"""Validation of env kwargs shared by the emulator backends: one clear error naming the bad kwarg."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

Box = tuple[int, int, int, int]


def reject_unknown(env_id: str, given: dict[str, Any], allowed: Iterable[str]) -> None:
    """Raise ``TypeError`` for kwargs not in ``allowed``, in Python's own wording plus a hint.

    The message starts like Python's ``f() got an unexpected keyword argument 'x'`` (first unknown kwarg
    in call order) because clients match that wording: TorchRL's ``GymEnv`` passes ``frameskip`` and drops
    it only when the error says ``unexpected keyword argument 'frameskip'``. Then it names a close match,
    any other unknown kwargs and the allowed ones.
    """
    allowed = sorted(allowed)
    unknown = [name for name in given if name not in allowed]
    if not unknown:
        return
    first = unknown[0]
    message = f"{env_id} got an unexpected keyword argument {first!r}"
    close = difflib.get_close_matches(str(first), allowed, n=1)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    if len(unknown) > 1:
        message += f"; also unexpected: {', '.join(map(repr, unknown[1:]))}"
    raise TypeError(f"{message}; allowed: {', '.join(allowed)}")


def check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a probability in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    choices = list(choices)
    if not any(value is c or (type(value) is type(c) and value == c) for c in choices):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_optional_int(name: str, value: Any, minimum: int) -> int | None:
    return None if value is None else check_int(name, value, minimum)


def resolve_crop(value: Any, game: str, table: dict[str, Box], env_id: str) -> Box | None:
    """``crop_score``: False/None (no crop), True (the game's box from the catalog) or an explicit box."""
    if value is None or value is False:
        return None
    if value is True:
        if game not in table:
            raise ValueError(
                f"{env_id}: crop_score=True but no score-crop box is known for {game}; pass an explicit "
                "box instead: crop_score=(top, bottom, left, right), the rows top:bottom and columns "
                "left:right of the full screen to keep"
            )
        return table[game]
    if (
        isinstance(value, (tuple, list))
        and len(value) == 4
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return tuple(value)  # type: ignore[return-value]
    raise TypeError(
        f"crop_score must be False, True or a box (top, bottom, left, right) of 4 ints, got {value!r}"
    )
