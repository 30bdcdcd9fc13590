"""The same seed plays the same games: every random draw of an evaluation (the policy's sampling, a DQN's
exploration, the Nature protocol's epsilon, the envs' no-ops and sticky actions) comes from its ``seed``,
whatever ran before in the process, and the process's own generators are given back untouched (a training
run evaluated between updates keeps its draws).

The committed agents of ``results/`` play, loaded as ``retrokit eval`` loads them (the run dir's loader,
which never unpickles and so never restores SB3's saved seed); a recorder beside them keeps the actions they
chose. Games are capped at a few dozen steps: the actions, not the scores, are compared.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from retro_atari_kit.evaluation import evaluate_model
from retro_atari_kit.evaluation.play import evaluate_model_vector
from retro_atari_kit.evaluation.protocols import protocol_model

RESULTS = os.path.join(os.path.dirname(__file__), "..", "..", "results")
BREAKOUT_PPO = os.path.join(RESULTS, "breakout-ppo-0", "model.zip")
PONG_DQN = os.path.join(RESULTS, "pong-dqn-0", "model.zip")
PONG_RLLIB = os.path.join(RESULTS, "pong-rllib-ppo-3m-0")
SHORT = {"max_episode_steps": 40}


class Recorder:
    """Plays as the model it holds and keeps every batch of actions chosen (the evaluation sees the held
    model through ``.model``, as it sees the protocols' wrappers)."""

    def __init__(self, model) -> None:
        self.model = model
        self.observation_space, self.action_space = model.observation_space, model.action_space
        self.actions: list[tuple[int, ...]] = []

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        actions, state = self.model.predict(
            obs, state=state, episode_start=episode_start, deterministic=deterministic
        )
        self.actions.append(tuple(int(a) for a in np.asarray(actions).reshape(-1)))
        return actions, state


def sb3_model(path: str, algo: str):
    from retro_atari_kit.integrations.sb3.training import load_model

    return load_model(path, device="cpu", algo=algo)


def played(model, env_id: str, seed: int, vector: bool = False, deterministic: bool = False) -> list:
    """The actions ``model`` chose in two short games from ``seed``, the process's generators first seeded
    from the OS (as a fresh process finds them; a loader or an earlier evaluation leaves them elsewhere)."""
    torch.seed()
    np.random.seed(None)
    random.seed(None)
    recorder = Recorder(model)
    play = evaluate_model_vector if vector else evaluate_model
    width = {"num_envs": 2} if vector else {"max_envs": 2}
    play(recorder, env_id, SHORT, episodes=2, seed=seed, deterministic=deterministic, **width)
    return recorder.actions


def generators() -> tuple:
    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def same_generators(a: tuple, b: tuple) -> bool:
    return (
        torch.equal(a[0], b[0])
        and all(np.array_equal(x, y) for x, y in zip(a[1], b[1], strict=True))
        and a[2] == b[2]
    )


@pytest.mark.timeout(300)
def test_a_sampling_policy_replays_its_actions_for_the_same_seed_and_leaves_the_process_generators():
    model = sb3_model(BREAKOUT_PPO, "ppo")
    first = played(model, "RetroKit/Breakout-v0", seed=5)
    assert played(model, "RetroKit/Breakout-v0", seed=5) == first
    assert played(model, "RetroKit/Breakout-v0", seed=6) != first
    torch.manual_seed(1)
    before = generators()
    evaluate_model(model, "RetroKit/Breakout-v0", SHORT, episodes=1, seed=5, max_envs=1)
    # what a training run draws next is what it would have drawn without the evaluation
    assert same_generators(generators(), before)


@pytest.mark.timeout(300)
def test_a_dqns_exploration_and_its_action_space_draw_from_the_seed():
    model = sb3_model(PONG_DQN, "dqn")
    model.exploration_rate = 0.5  # SB3's DQN explores through numpy's generator and its action space's
    space_draws = model.action_space.np_random.bit_generator.state
    first = played(model, "RetroKit/Pong-v0", seed=11)
    assert played(model, "RetroKit/Pong-v0", seed=11) == first
    assert played(model, "RetroKit/Pong-v0", seed=12) != first
    assert model.action_space.np_random.bit_generator.state == space_draws  # given back


@pytest.mark.timeout(300)
def test_the_nature_protocols_epsilon_starts_afresh_in_every_evaluation():
    dqn = sb3_model(PONG_DQN, "dqn")
    greedy, notes = protocol_model(dqn, "nature", "RetroKit/Pong-v0", "dqn", seed=3)
    assert notes == {"epsilon": 0.05}
    # one wrapper played twice (the first evaluation leaves its generator advanced)
    first = played(greedy, "RetroKit/Pong-v0", seed=3, deterministic=True)
    assert played(greedy, "RetroKit/Pong-v0", seed=3, deterministic=True) == first


@pytest.mark.timeout(300)
def test_the_vector_backend_replays_its_games_for_the_same_seed():
    model = sb3_model(BREAKOUT_PPO, "ppo")
    first = played(model, "RetroKit/Breakout-v0", seed=5, vector=True)
    assert played(model, "RetroKit/Breakout-v0", seed=5, vector=True) == first
    assert played(model, "RetroKit/Breakout-v0", seed=6, vector=True) != first


@pytest.mark.timeout(300)
def test_an_rllib_policy_samples_from_the_seed():
    from retro_atari_kit.integrations.rllib.policy import load_model

    policy = load_model(PONG_RLLIB, device="cpu")
    first = played(policy, "RetroKit/Pong-v0", seed=5)
    assert played(policy, "RetroKit/Pong-v0", seed=5) == first
    assert played(policy, "RetroKit/Pong-v0", seed=6) != first


@pytest.mark.timeout(300)
def test_a_recorded_video_replays_its_actions_for_the_same_seed(tmp_path):
    """``retrokit record``'s loop takes the policy's draws from its seed too: the same video again."""
    from retro_atari_kit.recording import record_video

    model = sb3_model(BREAKOUT_PPO, "ppo")
    runs = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        torch.seed()  # the process's generator anywhere, as a fresh process finds it
        recorder = Recorder(model)
        record_video(
            recorder, "RetroKit/Breakout-v0", {}, str(tmp_path / f"{name}.gif"), seed=seed, max_steps=30
        )
        runs.append(recorder.actions)
    assert runs[0] == runs[1] and runs[0] != runs[2]
