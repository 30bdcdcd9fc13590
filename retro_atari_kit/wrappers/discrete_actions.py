"""A discrete action set made of button combos, for stable-retro consoles."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

# Named combo sets. Each entry is the list of buttons held together; [] is "no button".
ACTION_SETS: dict[str, list[list[str]]] = {
    # The 7 actions of the OpenAI Retro Contest / baselines' Sonic discretizer (B jumps, DOWN rolls).
    "sonic": [["LEFT"], ["RIGHT"], ["LEFT", "DOWN"], ["RIGHT", "DOWN"], ["DOWN"], ["DOWN", "B"], ["B"]],
    # Fighting games on a 6-button pad (Mortal Kombat II, Street Fighter II, ...): no-op, the 8 directions
    # (walk, jump, crouch), each attack button alone and crouching (DOWN + button); 21 actions.
    "fighting": [
        [],
        ["LEFT"],
        ["RIGHT"],
        ["UP"],
        ["DOWN"],
        ["UP", "LEFT"],
        ["UP", "RIGHT"],
        ["DOWN", "LEFT"],
        ["DOWN", "RIGHT"],
        ["A"],
        ["B"],
        ["C"],
        ["X"],
        ["Y"],
        ["Z"],
        ["DOWN", "A"],
        ["DOWN", "B"],
        ["DOWN", "C"],
        ["DOWN", "X"],
        ["DOWN", "Y"],
        ["DOWN", "Z"],
    ],
}


def combo_masks(
    combos: Sequence[Sequence[str]], buttons: Sequence[str | None], console: str = ""
) -> np.ndarray:
    """Turn button-name combos into a ``(len(combos), len(buttons))`` uint8 mask array.

    ``buttons`` is the console's button list (stable-retro's order; ``None`` marks unused slots). Raises
    ``ValueError`` naming the bad combo and the console's valid buttons, ``TypeError`` for a wrong shape.
    """
    valid = [b for b in buttons if b]
    where = f" on {console}" if console else ""
    if isinstance(combos, (str, bytes)) or not isinstance(combos, Sequence) or len(combos) == 0:
        raise TypeError(
            "action_set must be a non-empty list of button combos (each a list of button names, e.g. "
            f"[['LEFT'], ['RIGHT', 'B']]), got {combos!r}"
        )
    masks = np.zeros((len(combos), len(buttons)), dtype=np.uint8)
    for i, combo in enumerate(combos):
        if isinstance(combo, (str, bytes)) or not isinstance(combo, Sequence):
            raise TypeError(f"action_set[{i}] must be a list of button names, got {combo!r}")
        for name in combo:
            if name not in valid:
                raise ValueError(
                    f"action_set[{i}] = {list(combo)!r}: unknown button {name!r}{where}; "
                    f"valid buttons: {', '.join(valid)}"
                )
            masks[i, list(buttons).index(name)] = 1
    return masks


class DiscreteActions(gym.ActionWrapper):
    """Expose ``Discrete(n ** players)`` over a list of ``n`` button combos on a ``MultiBinary`` retro env.

    Action ``a`` holds, for player ``p``, the buttons of combo ``(a // n**p) % n`` (player 1 is the least
    significant digit, as in stable-retro's own discrete actions). Buttons not in the combo are released.
    The retro env should use ``Actions.ALL`` so that every combo is pressed exactly as listed.
    """

    def __init__(self, env: gym.Env, combos: Sequence[Sequence[str]], players: int = 1):
        super().__init__(env)
        buttons = list(env.unwrapped.buttons)
        self.combos = [list(c) for c in combos]
        self._masks = combo_masks(combos, buttons, getattr(env.unwrapped, "system", ""))
        self.players = players
        self._num_buttons = len(buttons)
        self.action_space = gym.spaces.Discrete(len(self.combos) ** players)

    def action(self, action) -> np.ndarray:
        index = int(action)
        out = np.zeros(self._num_buttons * self.players, dtype=np.uint8)
        n = len(self.combos)
        for p in range(self.players):
            out[p * self._num_buttons : (p + 1) * self._num_buttons] = self._masks[index % n]
            index //= n
        return out

    def get_action_meanings(self) -> list[str]:
        """``"NOOP"`` or the held buttons joined by ``+``, per action (single-player numbering)."""
        return ["+".join(c) if c else "NOOP" for c in self.combos]
