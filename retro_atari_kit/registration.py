"""Registration of the ``RetroKit/`` namespace with gymnasium (idempotent, no emulator started)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

import gymnasium as gym

from retro_atari_kit.catalog import ENTRY_POINTS, ale_games, retro_games
from retro_atari_kit.catalog.suggest import did_you_mean
from retro_atari_kit.errors import RunError

VECTOR_ENTRY_POINT = "retro_atari_kit.vector:make_vector_env"


def _register(env_id: str, entry_point: str, kwargs: dict) -> None:
    if env_id in gym.registry:  # re-import / reload: keep the existing spec, no override warning
        return
    gym.register(
        id=env_id,
        entry_point=entry_point,
        vector_entry_point=VECTOR_ENTRY_POINT,
        kwargs=kwargs,
        nondeterministic=False,
    )


def register_all(include: Iterable[str] | str | None = None) -> None:
    """Register every ALE game and every stable-retro integration under ``RetroKit/``.

    stable-retro's ``stable`` integrations are always registered; ``include`` adds ``"contrib"`` and/or
    ``"experimental"`` (or ``"all"``); ``None`` reads ``RETROKIT_RETRO_INTEGRATIONS`` (e.g.
    ``contrib,experimental``). Only folder names are read: no emulator is started, no ROM is hashed.
    """
    for game in ale_games():
        _register(game.env_id, ENTRY_POINTS["ale"], {"game": game.name})
    try:
        games = retro_games(include)
    except ImportError:  # stable-retro not installed: ALE IDs only
        games = ()
    for game in games:
        _register(game.env_id, ENTRY_POINTS["retro"], {"game": game.name})


def check_env_id(env_id: str) -> None:
    """Raise RunError unless ``env_id`` is a registered ``RetroKit/`` ID; names close matches, and the kit's
    ID for another package's ID of the same game (``ALE/Pong-v5``, ``PongNoFrameskip-v4`` ->
    ``RetroKit/Pong-v0``): those build another package's stack, which the kit's tools are not made for."""
    if env_id.startswith("RetroKit/") and env_id in gym.registry:
        return
    kit_id = kit_env_id_for(env_id)
    if kit_id is not None:
        raise RunError(f"{env_id!r} is not a RetroKit env; use {kit_id} (the kit's stack of that game)")

    ids = [k for k in gym.registry if k.startswith("RetroKit/")]
    # IDs containing the text first (`Sonic` -> RetroKit/SonicTheHedgehog-Genesis-v0, ...), then typos
    hint = did_you_mean(env_id, ids, more_hint=f"retrokit list {_bare_name(env_id)}")
    raise RunError(f"unknown env {env_id!r}{hint or '; see `retrokit list`'}")


def _bare_name(env_id: str) -> str:
    """What to pass to ``retrokit list`` for an unknown ID: its game part, no namespace or version."""
    return re.sub(r"-v\d+$", "", env_id.split(":", 1)[-1].rsplit("/", 1)[-1]) or env_id


def kit_env_id_for(env_id: str) -> str | None:
    """The ``RetroKit/`` ID of the game another package's ID names (``ALE/Pong-v5``, ``Pong-v0``,
    ``PongNoFrameskip-v4``, ``Pong-ramDeterministic-v4``), or None."""
    name = env_id.split(":", 1)[-1].rsplit("/", 1)[-1]
    name = re.sub(r"-v\d+$", "", name)
    name = re.sub(r"(-ram)?(NoFrameskip|Deterministic)?$", "", name)
    candidate = f"RetroKit/{name}-v0"
    return candidate if name and candidate != env_id and candidate in gym.registry else None


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)``, except that the kit's ``max_episode_steps`` reaches the kit's stack.

    gymnasium's ``make`` keeps a ``max_episode_steps`` argument for itself and wraps its own TimeLimit around
    the whole stack, above the true-score statistics, where a cut game is never reported (no
    ``info["episode"]``): a loop waiting for game ends, like an evaluation, would wait forever. Here every
    kwarg goes to the env's spec instead, so the limit sits inside the stack, below the statistics, as
    ``gym.make_vec`` and ``make_ale_env`` / ``make_retro_env`` put it. The kit's own tools make single envs
    with this; ``env.spec`` keeps the kwargs, so ``gym.make(env.spec)`` rebuilds the same env.
    """
    spec = gym.spec(env_id.split(":", 1)[-1])  # "retro_atari_kit:RetroKit/..." names this module, imported
    return gym.make(dataclasses.replace(spec, kwargs={**spec.kwargs, **kwargs}))


def open_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """Build one env to validate the ID, its kwargs and ROM presence; the caller closes it.

    Any problem is a RunError with the env's own one-line message (unknown kwarg, missing ROM, ...).
    """
    check_env_id(env_id)
    try:
        return make_env(env_id, **env_kwargs)
    except (ValueError, TypeError, FileNotFoundError, KeyError, RuntimeError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # the env's own messages often start with the ID (a missing ROM): name it once
        msg = msg.removeprefix(f"{env_id}: ")
        raise RunError(f"cannot make {env_id}: {msg}") from exc


def probe_env(env_id: str, env_kwargs: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
    """:func:`open_env`, closed again: the (observation, action) spaces of the env ``env_kwargs`` make."""
    env = open_env(env_id, env_kwargs)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()
