"""Press FIRE to start games that wait for it."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def has_fire_start(meanings: list[str]) -> bool:
    """The DeepMind rule for games that wait for FIRE: FIRE at action 1 and at least three actions."""
    return len(meanings) >= 3 and meanings[1] == "FIRE"


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
    follows the DeepMind setup: ``FIRE`` then action 2, resetting again if either step ends the episode.
    Rewards of these two steps are dropped (always zero when a game starts). Requires the action at
    index 1 to be ``FIRE`` and at least three actions.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        fire_reset_enabled(env.unwrapped.get_action_meanings(), True)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.env.reset(seed=seed, options=options)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            self.env.reset(options=options)
        obs, _, terminated, truncated, info = self.env.step(2)
        if terminated or truncated:
            obs, info = self.env.reset(options=options)
        return obs, info
