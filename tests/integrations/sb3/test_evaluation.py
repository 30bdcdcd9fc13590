"""``retrokit eval`` plays whole games and reads their true scores; a game limit from the run's env kwargs
must end games there (made with gym.make, the limit hid every game end and the evaluation never returned)."""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3")

from retro_atari_kit.integrations.sb3.evaluation import evaluate_model  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from retro_atari_kit.registration import make_env  # noqa: E402

ENV = "RetroKit/Pong-v0"


@pytest.mark.timeout(180)
def test_evaluation_ends_games_at_the_run_s_max_episode_steps():
    model = PPO("CnnPolicy", DummyVecEnv([lambda: make_env(ENV)]), n_steps=8, batch_size=8, device="cpu")
    scores = evaluate_model(model, ENV, {"max_episode_steps": 50}, episodes=3, max_envs=2)
    assert len(scores) == 3 and all(-21 <= s <= 21 for s in scores)
