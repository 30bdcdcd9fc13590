"""How a trained model plays under a protocol (:mod:`retro_atari_kit.protocols` defines them): a
minimal-action agent in the full action set (:class:`MappedActions`), the Nature protocol's epsilon-greedy
value-based agent (:class:`EpsilonGreedy`); :func:`protocol_model` picks what applies."""

from __future__ import annotations

from typing import Any

import numpy as np

from retro_atari_kit.errors import RunError
from retro_atari_kit.protocols import VALUE_BASED, Protocol, get_protocol
from retro_atari_kit.registration import make_env


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
