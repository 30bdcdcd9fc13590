"""Press FIRE to start games that wait for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

FIRE, FIRE_FOLLOW_UP = 1, 2  # the action indices pressed after a reset (FIRE, then UP/RIGHT in most games)


def has_fire_start(meanings: list[str]) -> bool:
    """The DeepMind rule for games that wait for FIRE: FIRE at action 1 and at least three actions."""
    return len(meanings) > FIRE_FOLLOW_UP and meanings[FIRE] == "FIRE"


def fire_reset_enabled(meanings: list[str], setting: bool | str) -> bool:
    """Whether to press FIRE on reset: ``"auto"`` follows :func:`has_fire_start`; ``True`` on a game
    without it raises ValueError."""
    if setting == "auto":
        return has_fire_start(meanings)
    if setting and not has_fire_start(meanings):
        raise ValueError(f"FireReset needs FIRE at action 1 and >= 3 actions, got {meanings}")
    return bool(setting)


class FireReset(gym.Wrapper):
    """After every reset, take FIRE then the action at index 2 (UP/RIGHT in most games).

    Games like Breakout stay frozen until FIRE is pressed; an agent that never fires gets stuck. This
    follows the DeepMind setup: ``FIRE`` then action 2, resetting again if either step ends the episode
    (:func:`fire_start`).
    Rewards of these two steps are dropped (always zero when a game starts). Requires the action at
    index 1 to be ``FIRE`` and at least three actions.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        fire_reset_enabled(env.unwrapped.get_action_meanings(), True)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.env.reset(seed=seed, options=options)
        return fire_start(self.env.step, lambda: self.env.reset(options=options))


def fire_start(
    step: Callable[[int], tuple[Any, Any, bool, bool, dict]], reset: Callable[[], tuple[Any, dict]]
) -> tuple[Any, dict]:
    """The fire-reset rule after a reset: ``step(FIRE)``, then ``step(FIRE_FOLLOW_UP)``, calling ``reset()``
    again whenever one of them ends the episode; rewards are dropped. Returns ``(obs, info)``. Shared by
    :class:`FireReset` and the native vector backend."""
    obs, _, terminated, truncated, info = step(FIRE)
    if terminated or truncated:
        reset()
    obs, _, terminated, truncated, info = step(FIRE_FOLLOW_UP)
    if terminated or truncated:
        obs, info = reset()
    return obs, info
