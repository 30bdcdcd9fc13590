"""What the kit's envs promise about rendering: ``render_mode`` None or ``"rgb_array"``, said in the metadata.

The emulators advertise ``"human"`` too, but the kit builds them headless (stable-retro's ``"human"`` opens
a window from inside the emulator, ALE's needs SDL). The stack's metadata therefore lists only what works,
so checkers that try every declared mode (gymnasium's ``check_env``) and users reading the metadata see
the truth. A window is one wrapper away: ``gymnasium.wrappers.HumanRendering`` over ``"rgb_array"``.
"""

from __future__ import annotations

from typing import Any

RENDER_MODES = ("rgb_array",)
EMULATOR_FPS = 60  # Atari 2600 and the stable-retro consoles the kit plays run at ~60 frames per second


def check_render_mode(env_id: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is None or ``"rgb_array"``; for ``"human"`` say how to get a
    window."""
    if value is None or (isinstance(value, str) and value in RENDER_MODES):
        return
    hint = ""
    if value == "human":
        hint = (
            ": the kit's envs render headless. For a window use render_mode='rgb_array' and wrap the env: "
            "gymnasium.wrappers.HumanRendering(env) (needs pygame and a display)"
        )
    raise ValueError(f"{env_id}: render_mode must be one of None, 'rgb_array'; got {value!r}{hint}")


def stack_metadata(emulator_metadata: dict[str, Any], frame_skip: int) -> dict[str, Any]:
    """The metadata of a whole kit stack: the emulator's keys, ``render_modes = ["rgb_array"]`` and
    ``render_fps`` = emulator fps / ``frame_skip`` (``render()`` shows one frame per agent step, so a video
    of those frames plays in real time, as ``retrokit record`` writes it)."""
    metadata = dict(emulator_metadata)
    metadata["render_modes"] = list(RENDER_MODES)
    metadata["render_fps"] = EMULATOR_FPS / frame_skip
    return metadata
