"""Parsing of ``retrokit`` argument values: step counts, ``--set`` and ``--env-kwarg`` items."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from typing import Any

from retro_atari_kit.cli._common import CliError
from retro_atari_kit.presets import PresetError, parse_overrides
from retro_atari_kit.runs.spec import MAX_SEED


def parse_timesteps(text: str | int | float) -> int:
    """``2e6``, ``2000000``, ``2_000_000``, ``500k`` or ``2M`` -> int; CliError otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip().replace("_", "").lower()
        scale = 1.0
        if s.endswith("k"):
            s, scale = s[:-1], 1e3
        elif s.endswith("m"):
            s, scale = s[:-1], 1e6
        try:
            value = float(s) * scale
        except ValueError:
            raise CliError(f"--timesteps {text!r} is not a number; use e.g. 2e6 or 100000") from None
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise CliError(f"--timesteps {text!r} must be a positive whole number, e.g. 2e6")
    return int(value)


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """``--set`` items -> ``{dotted key: YAML value}`` (the presets' override rule)."""
    items = list(items)
    for item in items:
        if "=" not in item:
            raise CliError(f"malformed --set {item!r}; use --set key=value, e.g. --set learning_rate=2.5e-4")
    try:
        return parse_overrides(items)
    except PresetError as exc:
        raise CliError(f"--set: {exc}") from None


def parse_env_kwargs(items: Iterable[str]) -> dict[str, Any]:
    """``--env-kwarg`` items (``crop_score=true``) -> ``{name: YAML value}``."""
    items = list(items)
    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise CliError(
                f"malformed --env-kwarg {item!r}; use --env-kwarg name=value, e.g. crop_score=true"
            )
    try:
        return parse_overrides(items)
    except PresetError as exc:
        raise CliError(f"--env-kwarg: {exc}") from None


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (``8``, ``1e3``; never rounded: ``2.7`` is refused)."""
    try:
        number = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not math.isfinite(number) or number != int(number):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return int(number)


def nonneg_steps(text: str) -> int:
    """argparse type: a step count >= 0 (``1e5`` accepted)."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 1e5)") from None
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 0")
    return int(value)


def seed(text: str) -> int:
    """argparse type: a seed, a whole number in [0, 2**32 - 1] (what numpy and gymnasium accept)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, {MAX_SEED}]")
    return value
