"""Evaluation protocols: the published settings under which an Atari agent's scores are measured, each
expressed as the kit's env kwargs (plus, for the Nature protocol, the epsilon of value-based agents).

A protocol overrides only the kwargs that define play (stickiness, action set, episode end, game length,
no-op starts); the kwargs that define what the agent sees (``frame_skip``, ``frame_stack``, ``screen_size``,
``grayscale``, ``crop_score``) stay the run's, so a trained policy receives the observations it learned on.
Definitions and their sources: docs/evaluation.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retro_atari_kit.catalog import env_kind
from retro_atari_kit.errors import RunError
from retro_atari_kit.registration import make_env

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
        source="the run's own env kwargs (the DeepMind training stack by default): whole games, true score",
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


def protocol_env_kwargs(protocol: Protocol | str, env_id: str, run_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The env kwargs to evaluate with: the run's, with the protocol's settings over them.

    RunError for a protocol other than ``training`` on a stable-retro game: the Machado and Nature
    protocols are defined for the ALE (its action sets, no-ops and frame cap have no stable-retro meaning).
    """
    p = get_protocol(protocol) if isinstance(protocol, str) else protocol
    if p.name == "training":
        return dict(run_kwargs)
    if env_kind(env_id) != "ale":
        raise RunError(
            f"the {p.name} protocol is defined for ALE games (RetroKit/<Game>-v0); {env_id} is not one: "
            "use --protocol training"
        )
    frame_skip = int(run_kwargs.get("frame_skip", 4))
    return {**run_kwargs, **p.settings(frame_skip)["env_kwargs"]}


def full_action_indices(env_id: str) -> list[int]:
    """Index in the full 18-action set of each action of the game's minimal set (ALE's action meanings):
    what a policy trained on the minimal set means when it plays in the full action space."""
    meanings = {}
    for full in (False, True):
        env = make_env(env_id, full_action_space=full)
        try:
            meanings[full] = env.unwrapped.get_action_meanings()
        finally:
            env.close()
    return [meanings[True].index(m) for m in meanings[False]]


class MappedActions:
    """A model trained on the minimal action set, playing in the full action set: its action ``i`` is sent
    as full-set action ``indices[i]`` (same meaning). The other actions of the full set are never chosen."""

    def __init__(self, model: Any, indices: list[int], n_full: int = 18) -> None:
        import gymnasium as gym

        self.model, self.indices = model, np.asarray(indices, dtype=np.int64)
        self.observation_space = getattr(model, "observation_space", None)
        self.action_space = gym.spaces.Discrete(n_full)

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        actions, state = self.model.predict(
            obs, state=state, episode_start=episode_start, deterministic=deterministic
        )
        return self.indices[np.asarray(actions, dtype=np.int64)], state


class EpsilonGreedy:
    """The Nature evaluation policy of a value-based agent: the arg-max action, replaced with probability
    ``epsilon`` by one drawn uniformly from the agent's ``n_actions`` (a seeded generator: reproducible).

    The evaluation loops call :meth:`seed_draws` with their seed before the first game, so every
    evaluation with one seed draws the same explorations, however often this wrapper has played before."""

    def __init__(self, model: Any, epsilon: float, n_actions: int, seed: int = 0) -> None:
        self.model, self.epsilon, self.n_actions = model, float(epsilon), int(n_actions)
        self.observation_space = getattr(model, "observation_space", None)
        self.action_space = getattr(model, "action_space", None)
        self.seed_draws(seed)

    def seed_draws(self, seed: int) -> None:
        """Start the exploration draws afresh from ``seed``."""
        self.rng = np.random.default_rng(seed)

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        actions, state = self.model.predict(obs, state=state, episode_start=episode_start, deterministic=True)
        actions = np.array(actions, dtype=np.int64, copy=True)
        explore = self.rng.random(actions.shape[0]) < self.epsilon
        actions[explore] = self.rng.integers(0, self.n_actions, int(explore.sum()))
        return actions, state


def protocol_model(
    model: Any,
    protocol: Protocol | str,
    env_id: str,
    algo: str | None,
    seed: int = 0,
    n_env_actions: int | None = None,
) -> tuple[Any, dict[str, Any]]:
    """``model`` as the protocol plays it, and notes for the record: epsilon-greedy for value-based agents
    under Nature; minimal->full action mapping when the protocol's action set is larger than the model's."""
    p = get_protocol(protocol) if isinstance(protocol, str) else protocol
    notes: dict[str, Any] = {}
    n_model = getattr(getattr(model, "action_space", None), "n", None)
    wrapped: Any = model
    if p.epsilon is not None and (algo or "").lower() in VALUE_BASED and n_model is not None:
        wrapped = EpsilonGreedy(wrapped, p.epsilon, n_model, seed=seed)
        notes["epsilon"] = p.epsilon
    if n_env_actions is not None and n_model is not None and n_model < n_env_actions:
        indices = full_action_indices(env_id)
        if len(indices) != n_model:
            raise RunError(
                f"the model has {n_model} actions, but {env_id}'s minimal action set has {len(indices)}: "
                "it was not trained on this game's minimal action set"
            )
        wrapped = MappedActions(wrapped, indices, n_env_actions)
        notes["action_map"] = indices
    return wrapped, notes
