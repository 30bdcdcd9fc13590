"""retro_atari_kit.integrations.sb3.make_vec_env: SB3 VecEnv conventions, seeds, monitor.csv, true scores."""

from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
import pytest
from retro_atari_kit.integrations.sb3 import make_vec_env
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor, load_results
from stable_baselines3.common.vec_env import VecEnv

from retro_atari_kit.envs.ale import make_ale_env


@pytest.mark.parametrize("backend", ["native", "subprocess"])
def test_per_rank_seeds_equal_gym_make(backend):
    venv = make_vec_env("RetroKit/Breakout-v0", n_envs=2, seed=21, backend=backend, fire_reset=False)
    try:
        assert isinstance(venv, VecEnv) and venv.backend == backend
        obs = venv.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        again = venv.reset()  # seeds are used once, as in SB3
    finally:
        venv.close()
    if backend == "subprocess":  # the native no-op RNG is ale-py's (see docs/vectorization.md)
        for rank in range(2):
            env = gym.make("RetroKit/Breakout-v0", fire_reset=False)
            ref, _ = env.reset(seed=21 + rank)
            env.close()
            np.testing.assert_array_equal(obs[rank], ref)
    assert again.shape == obs.shape


def test_sb3_step_conventions_true_scores_and_monitor_csv(tmp_path):
    """Breakout: life losses are dones without "episode"; game ends carry the true score; the CSV agrees."""
    monitor_dir = tmp_path / "monitor"
    kwargs = {"noop_max": 0}
    venv = make_vec_env(
        "RetroKit/Breakout-v0", n_envs=1, seed=4, backend="native", monitor_dir=str(monitor_dir), **kwargs
    )
    ref = gym.make("RetroKit/Breakout-v0", **kwargs)
    ref.reset(seed=4)
    rng = np.random.default_rng(0)
    episodes, life_dones, clipped_sum, ended_at = [], 0, 0.0, []
    try:
        venv.reset()
        for step in range(1, 401):
            action = int(rng.integers(0, 4))
            obs, rewards, dones, infos = venv.step(np.array([action]))
            r_obs, r_rew, r_term, r_trunc, r_info = ref.step(action)
            assert rewards.dtype == np.float32 and rewards[0] == r_rew
            clipped_sum += rewards[0]
            assert dones[0] == (r_term or r_trunc)
            if dones[0]:
                assert infos[0]["TimeLimit.truncated"] == (r_trunc and not r_term)
                terminal = infos[0]["terminal_observation"]
                assert terminal.shape == (4, 84, 84) and terminal.dtype == np.uint8
                r_obs, _ = ref.reset()
                if "episode" in infos[0]:
                    assert infos[0]["episode"]["r"] == r_info["episode"]["r"]
                    assert infos[0]["episode"]["l"] == r_info["episode"]["l"]
                    episodes.append(infos[0]["episode"])
                    ended_at.append(step)
                else:
                    assert "episode" not in r_info
                    life_dones += 1
            else:
                assert "episode" not in infos[0] and "terminal_observation" not in infos[0]
            np.testing.assert_array_equal(obs[0], r_obs)
    finally:
        venv.close()
        ref.close()
    assert episodes and life_dones >= 4
    assert sum(e["r"] for e in episodes) > 0
    path = monitor_dir / "0.monitor.csv"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0][1:])
    assert lines[0].startswith("#") and set(header) == {"t_start", "env_id"}
    assert header["env_id"] == "RetroKit/Breakout-v0"
    assert lines[1] == "r,l,t,segment_steps"
    rows = [line.split(",") for line in lines[2:]]
    assert [float(r[0]) for r in rows] == [e["r"] for e in episodes]
    assert [int(r[1]) for r in rows] == [e["l"] for e in episodes]
    assert [int(r[3]) for r in rows] == ended_at  # the steps made when each game ended
    frame = load_results(str(monitor_dir))  # SB3's reader understands the files
    assert list(frame["r"]) == [e["r"] for e in episodes]


def test_truncation_sets_timelimit_flag_and_episode():
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=2, seed=0, backend="subprocess", max_episode_steps=12)
    ref = make_ale_env("Pong", max_episode_steps=12)  # gym.make would put its TimeLimit outside the stack
    ref.reset(seed=0)
    try:
        venv.reset()
        for t in range(10):  # FIRE and action 2 of the fire reset took 2 of the 12 steps
            obs, _, dones, infos = venv.step(np.array([0, 0]))
            r_obs, _, _, r_trunc, r_info = ref.step(0)
            assert dones.all() == (t == 9)
        assert r_trunc
        for i in range(2):
            assert infos[i]["TimeLimit.truncated"] is True
            assert infos[i]["episode"]["l"] == 12 == r_info["episode"]["l"]
        np.testing.assert_array_equal(infos[0]["terminal_observation"], r_obs)
    finally:
        venv.close()
        ref.close()


class GameEnds(BaseCallback):
    """The learner's step count (``num_timesteps``) at every game's end."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[int] = []

    def _on_step(self) -> bool:
        self.at += [self.num_timesteps for info in self.locals["infos"] if "episode" in info]
        return True


def test_ppo_trains_and_logs_true_scores(tmp_path):
    monitor_dir = tmp_path / "monitor"
    venv = make_vec_env(
        "RetroKit/Breakout-v0", n_envs=2, seed=1, monitor_dir=str(monitor_dir), max_episode_steps=40
    )
    ends = GameEnds()
    try:
        model = PPO("CnnPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=1, verbose=0)
        assert model.get_env() is venv  # channel-first uint8: SB3 adds no VecTransposeImage
        model.learn(128, callback=ends)
        logged = sorted(round(ep["r"], 6) for ep in model.ep_info_buffer)
    finally:
        venv.close()
    rows = load_results(str(monitor_dir))
    assert len(logged) == len(rows) >= 2
    assert logged == sorted(rows["r"])  # ep_rew_mean is computed from the true scores in monitor.csv
    # each game's segment_steps is the learner's count when it ended; its l (40: the time limit) also counts
    # the 2 steps of the stack's fire reset, which the learner never sees: the first games end at 2 x 38
    assert sorted(rows["segment_steps"]) == sorted(ends.at)
    assert rows["segment_steps"].min() == 2 * 38 and (rows["l"] == 40).all()
    assert sorted(os.listdir(monitor_dir)) == ["0.monitor.csv", "1.monitor.csv"]


def test_defaults_and_errors():
    venv = make_vec_env("RetroKit/Pong-v0", backend="native")
    try:
        assert venv.num_envs == (os.cpu_count() or 1)
        assert venv.env_is_wrapped(Monitor) == [False] * venv.num_envs  # it holds no SB3 Monitor
        assert venv.get_attr("render_mode") == [None] * venv.num_envs
        assert venv.env_method("get_action_meanings", indices=[0])[0][1] == "FIRE"
    finally:
        venv.close()
    venv.close()
    with pytest.raises(ValueError, match="n_envs"):
        make_vec_env("RetroKit/Pong-v0", n_envs=0)
    with pytest.raises(ValueError, match="RetroKit/"):
        make_vec_env("CartPole-v1", n_envs=1)
    with pytest.raises(ValueError, match="backend"):
        make_vec_env("RetroKit/Pong-v0", n_envs=1, backend="gpu")
