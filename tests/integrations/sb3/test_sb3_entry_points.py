"""SB3's own entry points report true game scores on kit envs: PPO("CnnPolicy", id), SB3's make_vec_env,
Monitor under evaluate_policy, evaluate_policy over the kit's launcher, VecMonitor; VecFrameStack over a kit
env warns.

SpaceInvaders has three lives and rewards of 5-30 points: per-life clipped returns (what a plain Monitor
records) are small integer counts, true scores are multiples of 5 in the hundreds.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from retro_atari_kit.integrations.sb3 import NatureCNN
from retro_atari_kit.integrations.sb3 import make_vec_env as kit_make_vec_env
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack, VecMonitor

import retro_atari_kit  # noqa: F401
from retro_atari_kit.registration import make_env

pytestmark = pytest.mark.slow

GAME = "RetroKit/SpaceInvaders-v0"
RETRO = "RetroKit/Airstriker-Genesis-v0"


def _true_scores(scores) -> None:
    assert scores, "no game ended"
    assert all(s % 5 == 0 for s in scores), scores
    assert max(scores) >= 50, scores  # real scores, not per-life counts of hits


class LifeEnds(gym.Wrapper):
    """Counts the episode ends SB3 sees (life losses and game overs)."""

    def __init__(self, env):
        super().__init__(env)
        self.ends = 0

    def step(self, action):
        out = self.env.step(action)
        self.ends += int(out[2] or out[3])
        return out


class Collect(BaseCallback):
    def __init__(self):
        super().__init__()
        self.dones = 0
        self.records = []

    def _on_step(self) -> bool:
        self.dones += int(np.sum(self.locals["dones"]))
        self.records += [info["episode"] for info in self.locals["infos"] if "episode" in info]
        return True


def test_ppo_with_an_env_id_logs_true_scores():
    model = PPO("CnnPolicy", GAME, n_steps=256, batch_size=128, n_epochs=1, seed=0, device="cpu")
    collect = Collect()
    model.learn(1536, callback=collect)
    scores = [r["r"] for r in collect.records]
    _true_scores(scores)
    assert [e["r"] for e in model.ep_info_buffer] == scores  # what ep_rew_mean averages
    assert collect.dones >= 2 * len(scores)  # life losses ended SB3's episodes but made no records


def test_sb3_make_vec_env_monitor_csvs_hold_true_scores(tmp_path):
    venv = sb3_make_vec_env(GAME, n_envs=2, seed=0, monitor_dir=str(tmp_path))
    venv.reset()
    rng = np.random.default_rng(0)
    seen = []
    while len(seen) < 3:
        _, _, _, infos = venv.step(rng.integers(0, venv.action_space.n, 2))
        seen += [info["episode"]["r"] for info in infos if "episode" in info]
    venv.close()
    rows = []
    for rank in range(2):
        with open(tmp_path / f"{rank}.monitor.csv", newline="") as f:
            lines = f.read().splitlines()[1:]  # the JSON header line, then SB3's CSV
        rows += [float(row["r"]) for row in csv.DictReader(lines)]
    _true_scores(seen)
    assert sorted(rows) == sorted(seen)


def test_evaluate_policy_through_monitor_returns_true_scores():
    model = PPO("CnnPolicy", GAME, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    counter = LifeEnds(gym.make(GAME))
    monitor = Monitor(counter)
    rewards, lengths = evaluate_policy(model, monitor, n_eval_episodes=2, return_episode_rewards=True)
    assert len(rewards) == 2 and rewards == monitor.get_episode_rewards()
    assert lengths == monitor.get_episode_lengths()
    assert all(r % 5 == 0 for r in rewards)
    assert counter.ends >= 3 * 2  # three lives per game: evaluate_policy waited for the real ends


@pytest.mark.parametrize("vec_cls", [DummyVecEnv, SubprocVecEnv])
def test_vec_monitor_over_kit_envs_records_true_games(vec_cls, tmp_path):
    kwargs = {"start_method": "forkserver"} if vec_cls is SubprocVecEnv else {}
    # the module prefix: a fresh worker process imports the kit (and so registers its IDs) itself
    envs = [lambda: gym.make(f"retro_atari_kit:{GAME}")] * 2
    venv = VecMonitor(vec_cls(envs, **kwargs), str(tmp_path / "vec"))
    venv.seed(3)
    venv.reset()
    rng = np.random.default_rng(1)
    seen = []
    while len(seen) < 3:
        _, _, _, infos = venv.step(rng.integers(0, venv.action_space.n, 2))
        seen += [info["episode"]["r"] for info in infos if "episode" in info]
    assert venv.episode_count == len(seen)
    venv.close()
    _true_scores(seen)


def test_retro_ids_through_sb3_make_vec_env(tmp_path):
    """A retro ID (no lives; rewards in points, clipped for training): the monitor keeps the points."""
    venv = sb3_make_vec_env(
        lambda: make_env(RETRO, max_episode_steps=120), n_envs=1, seed=0, monitor_dir=str(tmp_path)
    )
    venv.reset()
    rng = np.random.default_rng(2)
    seen, hits = [], 0
    while len(seen) < 3:
        _, rewards, _, infos = venv.step(rng.integers(0, venv.action_space.n, 1))
        hits += int(rewards[0] > 0)
        seen += [info["episode"]["r"] for info in infos if "episode" in info]
    venv.close()
    with open(tmp_path / "0.monitor.csv", newline="") as f:
        rows = [float(row["r"]) for row in csv.DictReader(f.read().splitlines()[1:])]
    assert rows == seen and sum(seen) > hits  # points, not counts of positive rewards


def test_vec_frame_stack_over_a_kit_env_warns_once_naming_the_cause():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stacked = VecFrameStack(DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0")]), 4)
    messages = [str(w.message) for w in caught if "stacks frames twice" in str(w.message)]
    assert len(messages) == 1 and "(16, 84, 84)" in messages[0] and "remove VecFrameStack" in messages[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NatureCNN(stacked.observation_space)
    assert any("frames stacked twice" in str(w.message) for w in caught)
    stacked.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        VecFrameStack(DummyVecEnv([lambda: gym.make("CartPole-v1")]), 4).close()
        NatureCNN(gym.make("RetroKit/Pong-v0").observation_space)
    assert not [w for w in caught if "twice" in str(w.message)]


def test_monitor_around_other_envs_is_sb3s():
    monitor = Monitor(gym.make("CartPole-v1"))
    monitor.reset(seed=0)
    while len(monitor.get_episode_rewards()) < 2:
        _, _, terminated, truncated, _ = monitor.step(monitor.action_space.sample())
        if terminated or truncated:
            monitor.reset()
    assert monitor.get_episode_rewards() == [float(n) for n in monitor.get_episode_lengths()]


@pytest.mark.parametrize("first", ["stable_baselines3", "retro_atari_kit"])
def test_adapters_apply_whichever_is_imported_first(first):
    second = "retro_atari_kit" if first == "stable_baselines3" else "stable_baselines3"
    code = (
        f"import {first}, {second}\n"
        "from stable_baselines3.common.monitor import Monitor\n"
        "from stable_baselines3.common.vec_env import VecMonitor, VecFrameStack\n"
        "from retro_atari_kit.adapters import MARK\n"
        "print(all(getattr(f, MARK, False) for f in "
        "(Monitor.step, VecMonitor.__init__, VecMonitor.step_wait, VecFrameStack.__init__)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"


class _RandomAgent:
    """What ``evaluate_policy`` needs of a model: ``predict``, here seeded random actions."""

    def __init__(self, n: int, actions: int):
        self.n, self.actions, self.rng = n, actions, np.random.default_rng(0)

    def predict(self, observation, state=None, episode_start=None, deterministic=False):
        return self.rng.integers(self.actions, size=self.n), None


def test_evaluate_policy_counts_whole_games_with_their_true_scores(recwarn):
    """SB3's evaluate_policy over the kit's launcher (whose ``env_is_wrapped(Monitor)`` is truthfully False):
    no 'not wrapped with a Monitor' warning, and one episode per whole game with its true score, never one per
    life, although life losses end training episodes."""
    venv = kit_make_vec_env("RetroKit/Breakout-v0", n_envs=2, seed=3)
    life_losses, steps, games = [], [0, 0], {0: [], 1: []}

    def watch(local_vars, global_vars):
        i, done, info = local_vars["i"], local_vars["done"], local_vars["info"]
        steps[i] += 1
        life_losses.append(bool(done) and "episode" not in info)
        if "episode" in info:  # a real game over: its record, and the steps the env took since the last one
            games[i].append((info["episode"]["r"], info["episode"]["l"], steps[i]))
            steps[i] = 0

    try:
        rewards, lengths = evaluate_policy(
            _RandomAgent(2, 4), venv, n_eval_episodes=2, return_episode_rewards=True, callback=watch
        )
    finally:
        venv.close()
    assert not [w for w in recwarn if "Monitor" in str(w.message)]
    assert any(life_losses)  # per-life counting would have reported those as episodes
    first = [games[0][0], games[1][0]]  # evaluate_policy counts one game per env here
    # whole games: every agent step of all lives, and the steps a reset takes after a life loss (FIRE, ...)
    assert all(length >= walked for _, length, walked in first)
    assert sorted(zip(rewards, lengths, strict=True)) == sorted((r, length) for r, length, _ in first)
