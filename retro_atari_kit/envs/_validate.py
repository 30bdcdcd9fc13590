"""Validation shared by the emulator backends and the vector backends: env kwargs, and the actions and seeds
of ``step`` / ``reset``; each mistake gives one clear error line naming what is wrong and what is allowed."""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable
from typing import Any

import gymnasium as gym
import numpy as np

from retro_atari_kit.errors import as_int

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
    """``value`` as a Python int (numpy integers too, not bools), or one error line naming ``name``."""
    number = as_int(value)
    if number is None:
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    if number < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return number


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy numbers too
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
    if isinstance(value, (tuple, list)) and len(value) == 4 and all(as_int(v) is not None for v in value):
        return tuple(as_int(v) for v in value)  # type: ignore[return-value]
    raise TypeError(
        f"crop_score must be False, True or a box (top, bottom, left, right) of 4 ints, got {value!r}"
    )


# -- actions and seeds of step() / reset(): one rule for the single envs and every vector backend ------------
# Checked in the calling process before anything reaches an emulator or a worker, so a refused call changes
# no env's state (no RNG draw, no sticky action kept, no half-sent batch); the next call gets its own reply.

# Seeds have no upper bound: gymnasium's envs (``np_random``), ale-py's ``AtariEnv`` and stable-retro take any
# int >= 0 (numpy's SeedSequence), so ``seed + rank`` never leaves the range, whatever seed SB3 or a resumed
# run adds ranks to. The native backend hashes seeds into the 32-bit ones its C++ takes.


def _what(value: Any) -> str:
    """``value`` for an error message, with its type where the repr alone could mislead (``1.0 (float)``)."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = " ".join(repr(value).split())  # one line, whatever the value (a list of 2-D arrays)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# integer dtypes whose values all fit int64 (every one but uint64), for the fast path of check_actions
_EXACT = frozenset(np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"))


def _integer_dtype(dtype: np.dtype) -> bool:
    """An integer dtype whose values all fit the int64 of ``Discrete`` (so not uint64), as
    ``Discrete.contains`` requires (``np.can_cast``)."""
    return dtype.kind in "iu" and np.can_cast(dtype, np.int64)


def as_discrete(value: Any) -> int | None:
    """``value`` as an int if its type is one gymnasium's ``Discrete.contains`` takes (a Python int or bool,
    a numpy integer scalar or 0-d integer array other than uint64), else None. numpy bools and all floats
    are refused."""
    if isinstance(value, int):  # bool is an int, as in Discrete.contains
        return int(value)
    if isinstance(value, (np.integer, np.ndarray)) and value.shape == () and _integer_dtype(value.dtype):
        return int(value)
    return None


def _discrete_range(space: Any) -> tuple[int, int] | None:
    """``(low, high)`` (inclusive) of a ``Discrete`` space, None for any other space."""
    if isinstance(space, gym.spaces.Discrete):
        low = int(space.start)
        return low, low + int(space.n) - 1
    return None


def check_action(action: Any, space: Any) -> Any:
    """One env's action for ``step``: an int in ``space``'s range (returned as a Python int), else one
    ``ValueError`` line naming the problem and the range."""
    bounds = _discrete_range(space)
    if bounds is None:  # no kit stack has one; keep gymnasium's own membership test
        if not space.contains(action):
            raise ValueError(f"action must be in {space}; got {_what(action)}")
        return action
    low, high = bounds
    need = f"action must be an int in [{low}, {high}] ({space})"
    value = as_discrete(action)
    if value is None:
        raise ValueError(f"{need}; got {_what(action)}")
    if not low <= value <= high:
        raise ValueError(f"{need}; got {value} (out of range)")
    return value


def check_actions(actions: Any, space: Any, num_envs: int) -> np.ndarray:
    """The actions of one vector ``step``: exactly ``num_envs`` actions, each as :func:`check_action` takes
    it; returned as an int64 array of shape ``(num_envs,)``, else one ``ValueError`` line naming the problem
    (and the env) and the range. A 1-D integer array (the common case) costs one pass over a list."""
    bounds = _discrete_range(space)
    # the common case first, before any message is formatted: an int64 array of valid actions
    if isinstance(actions, np.ndarray) and actions.shape == (num_envs,) and actions.dtype.kind in "iu":
        values = actions.tolist()
        if (
            bounds is not None
            and bounds[0] <= min(values)
            and max(values) <= bounds[1]
            and actions.dtype in _EXACT
        ):
            return actions.astype(np.int64, copy=False)
    rule = f"in [{bounds[0]}, {bounds[1]}]" if bounds else f"in {space}"
    need = f"step() needs {num_envs} actions, one int {rule} per env"
    if isinstance(actions, np.ndarray) and _integer_dtype(actions.dtype) and actions.shape == (num_envs,):
        values = actions.tolist()
    elif actions is None or isinstance(actions, (str, bytes)) or as_discrete(actions) is not None:
        raise ValueError(f"{need}; got {_what(actions)}, not a sequence of actions")
    elif isinstance(actions, np.ndarray):
        if actions.ndim != 1:
            raise ValueError(f"{need}; got {_what(actions)}")
        if actions.dtype.kind != "O" and not _integer_dtype(actions.dtype):  # floats, bools, uint64, str
            raise ValueError(f"{need}; got {_what(actions)}")
        values = list(actions)
    else:
        try:
            values = list(actions)
        except TypeError:
            raise ValueError(f"{need}; got {_what(actions)}, not a sequence of actions") from None
    if len(values) != num_envs:
        raise ValueError(f"{need}; got {_count(len(values), 'action')}")
    out = np.empty(num_envs, dtype=np.int64)
    for env, action in enumerate(values):
        value = as_discrete(action)
        if value is None:
            raise ValueError(f"{need}; env {env}'s action is {_what(action)}")
        if bounds is None:
            if not space.contains(action):
                raise ValueError(f"{need}; env {env}'s action is {_what(action)}")
        elif not bounds[0] <= value <= bounds[1]:
            raise ValueError(f"{need}; env {env}'s action is {value} (out of range)")
        out[env] = value
    return out


def _as_seed(value: Any) -> int | None:
    """A Python or numpy integer as an int; bools (``seed=True`` is a mistake) and floats give None."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    return int(value)


def check_seed(seed: Any) -> int | None:
    """The seed of one env's ``reset``: None (unseeded) or an int >= 0 (numpy integers too), else one
    ``ValueError`` line."""
    if seed is None:
        return None
    value = _as_seed(seed)
    if value is None or value < 0:
        raise ValueError(f"seed must be None or an int >= 0; got {_what(seed) if value is None else value}")
    return value


def check_seeds(seed: Any, num_envs: int) -> list[int | None]:
    """The per-env seeds of a vector ``reset``: None (all unseeded); an int ``s`` >= 0 gives env ``i`` the
    seed ``s + i``; a list, tuple or 1-D array of ``num_envs`` seeds, each None or an int >= 0. Else one
    ``ValueError`` line."""
    if seed is None:
        return [None] * num_envs
    need = (
        f"seed must be None, an int >= 0 (env i is seeded with seed + i) or a list of {num_envs} seeds, "
        "each None or an int >= 0"
    )
    value = _as_seed(seed)
    if value is not None:
        if value < 0:
            raise ValueError(f"{need}; got {value}")
        return [value + rank for rank in range(num_envs)]
    if not isinstance(seed, (list, tuple)) and not (isinstance(seed, np.ndarray) and seed.ndim == 1):
        raise ValueError(f"{need}; got {_what(seed)}")
    if len(seed) != num_envs:
        raise ValueError(f"{need}; got {_count(len(seed), 'seed')}")
    seeds: list[int | None] = []
    for env, item in enumerate(seed):
        value = None if item is None else _as_seed(item)
        if item is not None and (value is None or value < 0):
            raise ValueError(f"{need}; env {env}'s seed is {_what(item) if value is None else value}")
        seeds.append(value)
    return seeds


class CheckedCalls(gym.Wrapper):
    """The outermost layer of a stack: ``step`` takes only :func:`check_action`'s actions and ``reset`` only
    :func:`check_seed`'s seeds, each mistake one ``ValueError`` line raised before any layer below runs (a
    bad action would otherwise leave state behind, e.g. as the sticky action of a frame skip)."""

    def step(self, action: Any):
        return self.env.step(check_action(action, self.action_space))

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        return self.env.reset(seed=check_seed(seed), options=options)
