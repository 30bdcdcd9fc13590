"""A CleanRL-style PPO loop on a kit ID, as docs/cleanrl.md tells CleanRL users to change ``ppo_atari.py``:
the Atari wrapper block gone, gymnasium's ``RecordEpisodeStatistics`` kept on every env, a ``SyncVectorEnv``
in ``SAME_STEP`` autoreset (gymnasium 0.29's semantics, which CleanRL's loop was written for), the episode
log read from ``infos["final_info"]``. It must run past several game overs and log true game scores."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions import Categorical

import retro_atari_kit  # noqa: F401
from retro_atari_kit.models import NatureCNN

pytestmark = pytest.mark.slow

GAME = "RetroKit/SpaceInvaders-v0"  # lives, and 5-30 points per hit


def make_env(env_id: str):
    def thunk():
        env = gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.network = NatureCNN(in_channels=4)  # uint8 in, divides by 255 once itself
        self.actor = nn.Linear(512, envs.single_action_space.n)
        self.critic = nn.Linear(512, 1)

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def test_cleanrl_style_ppo_loop_logs_true_scores_past_several_game_overs():
    torch.manual_seed(0)
    num_envs, num_steps = 2, 128
    envs = gym.vector.SyncVectorEnv(
        [make_env(GAME) for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    agent = Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    obs_buf = torch.zeros((num_steps, num_envs, *envs.single_observation_space.shape), dtype=torch.uint8)
    actions = torch.zeros((num_steps, num_envs), dtype=torch.long)
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    next_obs, _ = envs.reset(seed=1)
    logged, life_ends = [], 0
    for _ in range(12):
        for step in range(num_steps):
            obs_buf[step] = torch.as_tensor(next_obs)
            with torch.no_grad():
                action, logprob, _, _ = agent.get_action_and_value(obs_buf[step])
            actions[step], logprobs[step] = action, logprob
            next_obs, reward, terminations, truncations, infos = envs.step(action.numpy())
            rewards[step] = torch.as_tensor(reward)
            assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0}  # the agent trains on clipped rewards
            life_ends += int(np.sum(terminations | truncations))
            final = infos.get("final_info", {})
            if "_episode" in final:  # the docs' replacement of CleanRL's `for info in infos["final_info"]`
                logged += [float(final["episode"]["r"][i]) for i in np.flatnonzero(final["_episode"])]
        # one clipped policy-gradient update on the rollout (the loop's learner, kept minimal)
        _, new_logprob, entropy, _ = agent.get_action_and_value(
            obs_buf.reshape(-1, *envs.single_observation_space.shape), actions.reshape(-1)
        )
        advantages = rewards.reshape(-1) - rewards.mean()
        ratio = (new_logprob - logprobs.reshape(-1)).exp()
        surrogate = torch.min(ratio * advantages, ratio.clamp(0.9, 1.1) * advantages)
        loss = -surrogate.mean() - 0.01 * entropy.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if len(logged) >= 3:
            break
    envs.close()
    assert len(logged) >= 3, f"only {len(logged)} game overs in the loop"
    assert life_ends >= 3 * len(logged)  # three lives per game, one log line per game
    assert all(score % 5 == 0 for score in logged) and max(logged) >= 50, logged
