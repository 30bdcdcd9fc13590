"""Protocols: the published settings under which an Atari agent plays, each expressed as the kit's env kwargs
(plus, for the Nature protocol's evaluation, the epsilon of value-based agents). A run trains under one
(``retrokit train --protocol``, recorded in its config.yaml; :func:`training_env_kwargs`) and is evaluated
under any (``retrokit eval --protocol``, by default the one it trained under; :func:`protocol_env_kwargs`).

A protocol sets only the kwargs that define play (stickiness, action set, episode end, game length, no-op
starts); the kwargs that define what the agent sees (``frame_skip``, ``frame_stack``, ``screen_size``,
``grayscale``, ``crop_score``) stay the run's, so a trained policy receives the observations it learned on.
Definitions and their sources: docs/evaluation.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retro_atari_kit.catalog import env_kind
from retro_atari_kit.errors import RunError

# ALE's per-game frame cap (30 minutes of play at 60 Hz), always set by the kit's ALE env
ALE_FRAME_CAP = 108_000
# the DeepMind / Nature evaluation cap: 5 minutes of play at 60 Hz
NATURE_FRAME_CAP = 18_000
VALUE_BASED = frozenset({"dqn", "qrdqn"})


@dataclass(frozen=True)
class Protocol:
    """One evaluation protocol: ``env_kwargs`` set over the run's, ``epsilon`` for value-based agents
    (None: the agent acts as the command says, sampled or arg-max), ``frame_cap`` emulator frames per game."""

    name: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    frame_cap: int = ALE_FRAME_CAP
    epsilon: float | None = None
    source: str = ""

    def settings(self, frame_skip: int = 4) -> dict[str, Any]:
        """What the protocol fixes, for printing and for the eval record: its env kwargs, with the frame cap
        turned into the kit's ``max_episode_steps`` (agent steps) where it is shorter than ALE's own cap."""
        kwargs = dict(self.env_kwargs)
        if self.frame_cap < ALE_FRAME_CAP:
            kwargs["max_episode_steps"] = self.frame_cap // frame_skip
        out: dict[str, Any] = {"protocol": self.name, "frame_cap": self.frame_cap, "env_kwargs": kwargs}
        if self.epsilon is not None:
            out["epsilon_value_based"] = self.epsilon
        return out


PROTOCOLS: dict[str, Protocol] = {
    "training": Protocol(
        "training",
        source="the kit's default stack, the DeepMind training setup (Mnih et al. 2015), with the run's own "
        "env kwargs: whole games, true score",
    ),
    "machado": Protocol(
        "machado",
        env_kwargs={
            "sticky_actions": 0.25,
            "full_action_space": True,
            "terminal_on_life_loss": False,
            "noop_max": 0,
            "max_episode_steps": None,
        },
        source="Machado et al. 2018, Revisiting the Arcade Learning Environment, JAIR 61 "
        "(its recommended settings)",
    ),
    "nature": Protocol(
        "nature",
        env_kwargs={
            "sticky_actions": 0.0,
            "full_action_space": False,
            "terminal_on_life_loss": False,
            "noop_max": 30,
        },
        frame_cap=NATURE_FRAME_CAP,
        epsilon=0.05,
        source="Mnih et al. 2015, Human-level control through deep reinforcement learning, Nature 518 "
        "(Methods: evaluation procedure)",
    ),
}


def get_protocol(name: str) -> Protocol:
    """The protocol ``name``; RunError naming the choices."""
    if name not in PROTOCOLS:
        raise RunError(f"unknown protocol {name!r}; choose one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


def _ale_only(p: Protocol, env_id: str) -> None:
    if p.name != "training" and env_kind(env_id) != "ale":
        raise RunError(
            f"the {p.name} protocol is defined for ALE games (RetroKit/<Game>-v0); {env_id} is not one: "
            "use --protocol training"
        )


def protocol_env_kwargs(protocol: Protocol | str, env_id: str, run_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The env kwargs to evaluate with: ``run_kwargs`` (the run's own, :func:`run_env_kwargs`) with the
    protocol's settings over them.

    RunError for a protocol other than ``training`` on a stable-retro game: the Machado and Nature
    protocols are defined for the ALE (its action sets, no-ops and frame cap have no stable-retro meaning).
    """
    p = get_protocol(protocol) if isinstance(protocol, str) else protocol
    _ale_only(p, env_id)
    if p.name == "training":
        return dict(run_kwargs)
    frame_skip = int(run_kwargs.get("frame_skip", 4))
    return {**run_kwargs, **p.settings(frame_skip)["env_kwargs"]}


def training_settings(protocol: Protocol | str, frame_skip: int = 4) -> dict[str, Any]:
    """The env kwargs a run trained under ``protocol`` plays with: the protocol's settings but its action
    set. An agent learns on the game's minimal action set and plays the full one at evaluation through the
    minimal->full map (the same emulator inputs; docs/evaluation.md), so an 18-action protocol costs it
    no redundant outputs."""
    p = get_protocol(protocol) if isinstance(protocol, str) else protocol
    settings = dict(p.settings(frame_skip)["env_kwargs"])
    settings.pop("full_action_space", None)
    return settings


def training_env_kwargs(protocol: str, env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The env kwargs of a run trained under ``protocol``: ``env_kwargs`` with :func:`training_settings`
    over them. RunError for a non-ALE game under a protocol other than ``training``, or for an env kwarg that
    contradicts the protocol (it would be silently overridden)."""
    p = get_protocol(protocol)
    _ale_only(p, env_id)
    settings = training_settings(p, int(env_kwargs.get("frame_skip", 4)))
    for key, value in settings.items():
        if key in env_kwargs and env_kwargs[key] != value:
            raise RunError(
                f"--protocol {p.name} sets {key}={value}; drop --env-kwarg {key}={env_kwargs[key]} "
                "(or train with --protocol training and your own env kwargs)"
            )
    return {**env_kwargs, **settings}


def run_env_kwargs(env_kwargs: dict[str, Any], trained_under: str | None) -> dict[str, Any]:
    """A run's own env kwargs: those in its config.yaml without what its training protocol set (a run made
    before protocols were recorded trained under ``training``). What every protocol is applied over, so
    ``--protocol training`` evaluates a sticky-trained agent on the default stack."""
    if not trained_under or trained_under == "training":
        return dict(env_kwargs)
    settings = training_settings(trained_under, int(env_kwargs.get("frame_skip", 4)))
    return {k: v for k, v in env_kwargs.items() if k not in settings}
