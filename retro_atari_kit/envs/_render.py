"""What the kit's envs promise about rendering: ``render_mode`` None, ``"rgb_array"`` or ``"human"``.

The emulators are always built headless, with ``"rgb_array"`` (stable-retro's own ``"human"`` opens a window
from inside the emulator; ALE's needs an SDL build). ``"human"`` is the ``"rgb_array"`` stack under
gymnasium's ``HumanRendering`` (pygame): a window that shows every agent step at the stack's
``render_fps`` (emulator fps / ``frame_skip``, i.e. real time). The window is the env's render mode, not a
step of the stack: it stays out of ``env.spec``'s wrappers, so ``env.spec.make(render_mode=...)`` (what
gymnasium's ``check_env`` does for each declared mode) rebuilds exactly the stack asked for.

Before the emulator starts, ``"human"`` checks that pygame is installed (if not, one
:class:`WindowUnavailableError` line says what to do: pygame is a dependency of the package) and that SDL
has a display. Without a display (a server, CI, a notebook) a window cannot be shown, but nothing else is
wrong: a :class:`NoDisplayWarning` says so once per process and the env plays on with SDL's headless driver
(``render()`` returns None, as for any ``"human"`` env). So gymnasium's ``check_env``, which makes the env
in every declared render mode, passes on a machine with no display and no SDL variable set.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import HumanRendering

RENDER_MODES = ("human", "rgb_array")
EMULATOR_FPS = 60  # Atari 2600 and the stable-retro consoles the kit plays run at ~60 frames per second
WINDOW_HEIGHT = 480  # the window shows the frame enlarged by a whole factor to about this height
HEADLESS_DRIVERS = ("offscreen", "dummy")  # SDL drivers that draw nowhere visible


class WindowUnavailableError(RuntimeError):
    """``render_mode="human"`` cannot work here: pygame is not installed."""


class NoDisplayWarning(UserWarning):
    """``render_mode="human"`` on a machine with no display: the env plays on, with no visible window."""


_said_no_display = False  # the warning is given once per process


def check_render_mode(env_id: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is None, ``"rgb_array"`` or ``"human"``."""
    if value is None or (isinstance(value, str) and value in RENDER_MODES):
        return
    raise ValueError(
        f"{env_id}: render_mode must be one of None, 'rgb_array', 'human' (a window); got {value!r}"
    )


def stack_metadata(emulator_metadata: dict[str, Any], frame_skip: int) -> dict[str, Any]:
    """The metadata of a whole kit stack: the emulator's keys, ``render_modes = ["human", "rgb_array"]`` and
    ``render_fps`` = emulator fps / ``frame_skip`` (``render()`` shows one frame per agent step, so a video
    of those frames plays in real time, as ``retrokit record`` writes it, and so does the window)."""
    metadata = dict(emulator_metadata)
    metadata["render_modes"] = list(RENDER_MODES)
    metadata["render_fps"] = EMULATOR_FPS / frame_skip
    return metadata


def without_window(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kwargs of the stack a window shows: the same, built with ``render_mode="rgb_array"``."""
    return {**kwargs, "render_mode": "rgb_array"}


def check_window(env_id: str) -> None:
    """Make sure pygame can draw the window here: :class:`WindowUnavailableError` (one line, what to do) if
    pygame is missing; with no display, :class:`NoDisplayWarning` once per process, then a headless driver.

    SDL falls back to its invisible ``offscreen`` driver when there is no display, so a window nobody can
    see counts as no display unless ``SDL_VIDEODRIVER`` asked for a headless driver (tests, CI).
    """
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # pygame greets on stdout at import otherwise
    try:
        import pygame
    except ImportError:
        raise WindowUnavailableError(
            f"{env_id}: render_mode='human' needs pygame: pip install pygame "
            "(or use render_mode='rgb_array' and show env.render() frames yourself)"
        ) from None
    requested = os.environ.get("SDL_VIDEODRIVER", "").lower()
    if sys.platform.startswith("linux") and not (
        requested or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        # no X or Wayland display to connect to: say so without letting SDL probe for one (it prints its own
        # errors about XDG_RUNTIME_DIR on stderr), and draw with its dummy driver
        os.environ["SDL_VIDEODRIVER"] = "dummy"
        _no_display(env_id, "this machine has no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
        return
    try:
        pygame.display.init()
        driver = pygame.display.get_driver()
    except pygame.error as exc:
        problem = f"SDL cannot open a display ({exc})"
        # no usable video driver at all: SDL's dummy one draws nowhere, which is all a headless run needs
        os.environ["SDL_VIDEODRIVER"] = "dummy"
        pygame.display.init()
    else:
        if driver not in HEADLESS_DRIVERS:
            return
        if driver in requested:
            _silent_audio()
            return
        problem = f"SDL found no display (it fell back to its invisible {driver!r} driver)"
    _no_display(env_id, problem)


def _no_display(env_id: str, problem: str) -> None:
    """The env plays on with no visible window: :class:`NoDisplayWarning`, once per process."""
    _silent_audio()
    global _said_no_display
    if not _said_no_display:
        _said_no_display = True
        warnings.warn(
            f"{env_id}: render_mode='human' shows a window, but {problem}; playing on with no window "
            "(run on a desktop or under xvfb-run to see it, set SDL_VIDEODRIVER=dummy to silence this, or "
            "use render_mode='rgb_array' for the frames); said once per process",
            NoDisplayWarning,
            stacklevel=5,
        )


def _silent_audio() -> None:
    # HumanRendering's pygame.init() also starts the mixer; a headless run has no sound card, on which ALSA
    # prints a page of errors. The kit plays no sound: the silent driver, unless one was chosen.
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


class _EnlargedFrames(gym.Wrapper):
    """``render()`` frames enlarged by a whole factor (nearest pixel) so the window is not stamp-sized; not
    part of the stack's spec."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._factor: int | None = None

    @property
    def spec(self):  # type: ignore[override]
        return self.env.spec

    def render(self) -> np.ndarray:
        frame = self.env.render()
        if self._factor is None:
            self._factor = max(1, round(WINDOW_HEIGHT / frame.shape[0]))
        if self._factor == 1:
            return frame
        return np.repeat(np.repeat(frame, self._factor, axis=0), self._factor, axis=1)


class KitWindow(HumanRendering):
    """gymnasium's ``HumanRendering`` over a kit stack built with ``"rgb_array"``: the frames of every
    ``reset`` and ``step`` in a pygame window titled with the env ID, at the stack's ``render_fps``;
    ``render()`` returns None; ``close()`` closes the window. Its ``spec`` is the stack's (see the module
    docstring)."""

    def __init__(self, env: gym.Env, title: str):
        super().__init__(_EnlargedFrames(env))
        self._title = title
        self._titled = False

    @property
    def spec(self):  # type: ignore[override]
        return self.env.spec

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        result = super().reset(seed=seed, options=options)  # opens the window on the first call
        if not self._titled and self.window is not None:
            import pygame

            pygame.display.set_caption(self._title)
            self._titled = True
        return result


def with_window(env: gym.Env, env_id: str) -> gym.Env:
    """``env`` (a kit stack built with ``render_mode="rgb_array"``) shown in a window."""
    return KitWindow(env, env_id)
