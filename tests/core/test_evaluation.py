"""``retrokit eval`` plays whole games and reads their true scores. The loop is the kit's own (no framework
in the core); SB3's DummyVecEnv, with its seeding and auto-reset, is the oracle: a model that records what
it is shown must see the same observations, episode starts and scores from both."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from retro_atari_kit.evaluation import evaluate_model
from retro_atari_kit.registration import make_env

ENV = "RetroKit/Pong-v0"


class Recorder:
    """A model that records every batch it is asked to act on."""

    def __init__(self, model) -> None:
        self.model = model
        self.seen: list[tuple[str, tuple[bool, ...]]] = []

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        self.seen.append(
            (hashlib.sha1(np.ascontiguousarray(obs).tobytes()).hexdigest(), tuple(episode_start))
        )
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)


def sb3_loop(model, kwargs: dict, targets: list[int], seed: int) -> list[float]:
    """The same evaluation with SB3's DummyVecEnv (seed + i per env, auto-reset on game end)."""
    venv = DummyVecEnv([lambda: make_env(ENV, **kwargs) for _ in targets])
    venv.seed(seed)
    obs = venv.reset()
    counts, scores, starts = [0] * len(targets), [], np.ones(len(targets), dtype=bool)
    while sum(counts) < sum(targets):
        actions, _ = model.predict(obs, episode_start=starts, deterministic=True)
        obs, _, starts, infos = venv.step(actions)
        for i, info in enumerate(infos):
            if info.get("episode") is not None and counts[i] < targets[i]:
                scores.append(float(info["episode"]["r"]))
                counts[i] += 1
    venv.close()
    return scores


@pytest.mark.timeout(300)
def test_evaluation_matches_sb3_vector_env_and_ends_games_at_max_episode_steps():
    # a game limit from the run's env kwargs must end games (made with gym.make, gymnasium kept the limit
    # for itself, no game end was ever reported and the evaluation never returned)
    kwargs = {"max_episode_steps": 150}
    model = PPO(
        "CnnPolicy", DummyVecEnv([lambda: make_env(ENV)]), n_steps=8, batch_size=8, seed=0, device="cpu"
    )
    ours, oracle = Recorder(model), Recorder(model)
    scores = evaluate_model(ours, ENV, kwargs, episodes=3, seed=7, deterministic=True, max_envs=2)
    expected = sb3_loop(oracle, kwargs, targets=[2, 1], seed=7)
    assert len(scores) == 3 and scores == expected
    assert ours.seen == oracle.seen and len(ours.seen) > 150  # env 0 played two games
