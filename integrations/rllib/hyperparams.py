"""Atari hyperparameters for RLlib, per algorithm and preset, with where each number comes from (data only).

Sources (the kit's env already does the DeepMind preprocessing, incl. reward clipping to sign, so RLlib's
own ``clip_rewards`` stays off):

- PPO: Schulman et al. 2017, "Proximal Policy Optimization Algorithms", Table 5 (Atari), as in baselines'
  ``ppo2`` and rl-zoo3's ``atari`` PPO (the kit's SB3 preset): 8 envs x 128 steps, 4 epochs, minibatch 256,
  lr 2.5e-4, clip 0.1, entropy 0.01, value coefficient 0.5, GAE lambda 0.95, gamma 0.99, grad norm 0.5; no
  KL penalty (the paper's Atari runs use the clipped objective only). ``vf_clip_param`` 10.0: RLlib's
  tuned ``rllib/examples/algorithms/ppo/atari_ppo.py``.
- APPO: RLlib's tuned ``rllib/examples/algorithms/appo/pong_appo.py`` (Ray 2.x): batch 500 per learner,
  lr 5e-4, value coefficient 1.0, entropy 0.01 annealed to 0 by 3M steps, target update every 2 updates,
  circular buffer 4 batches x 2 passes, weights broadcast every 5 updates.
- IMPALA: RLlib's tuned ``rllib/examples/algorithms/impala/pong_impala.py``: batch 500, lr 9e-4, grad norm
  30, value coefficient 1.0, entropy 0.02 annealed to 0 by 3M steps; rollout 50 (RLlib's IMPALA default;
  Espeholt et al. 2018 use 20-step unrolls with 100 for Atari-57 experiments in Table G.1).
- DQN: Mnih et al. 2015 (Nature DQN) with rl-zoo3's ``atari`` DQN sizes (the kit's SB3 DQN preset):
  replay 100k, learning starts 100k, batch 32, one update per 4 env steps, hard target update (tau 1)
  every 1000 env steps, lr 1e-4, epsilon 1 -> 0.01 over the first 1M steps (10% of 10M), Huber loss,
  gamma 0.99; double Q (van Hasselt et al. 2016, RLlib's default) on, dueling (Wang et al. 2016) off.

Keys are ``AlgorithmConfig`` attribute names; ``algo_config`` routes them to ``.training()``,
``.env_runners()`` or the module's ``model_config``.
"""

from __future__ import annotations

from typing import Any

ALGOS = ("ppo", "appo", "impala", "dqn")

# Settings of the runners / module per algorithm, then the training hyperparameters.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {
        "default": {
            "num_envs_per_env_runner": 8,
            "rollout_fragment_length": 128,
            "gamma": 0.99,
            "lambda_": 0.95,
            "lr": 2.5e-4,
            "num_epochs": 4,
            "minibatch_size": 256,
            "clip_param": 0.1,
            "entropy_coeff": 0.01,
            "vf_loss_coeff": 0.5,
            "vf_clip_param": 10.0,
            "use_kl_loss": False,
            "grad_clip": 0.5,
            "grad_clip_by": "global_norm",
        },
    },
    "appo": {
        "default": {
            "num_envs_per_env_runner": 8,
            "rollout_fragment_length": 50,
            "train_batch_size_per_learner": 500,
            "gamma": 0.99,
            "lr": 5e-4,
            "vf_loss_coeff": 1.0,
            "entropy_coeff": [[0, 0.01], [3_000_000, 0.0]],
            "target_network_update_freq": 2,
            "circular_buffer_num_batches": 4,
            "circular_buffer_iterations_per_batch": 2,
            "broadcast_interval": 5,
        },
    },
    "impala": {
        "default": {
            "num_envs_per_env_runner": 8,
            "rollout_fragment_length": 50,
            "train_batch_size_per_learner": 500,
            "gamma": 0.99,
            "lr": 9e-4,
            "grad_clip": 30.0,
            "grad_clip_by": "global_norm",
            "vf_loss_coeff": 1.0,
            "entropy_coeff": [[0, 0.02], [3_000_000, 0.0]],
        },
    },
    "dqn": {
        "default": {
            "num_envs_per_env_runner": 1,
            "rollout_fragment_length": 4,
            "gamma": 0.99,
            "lr": 1e-4,
            "train_batch_size_per_learner": 32,
            # 32 replayed per 4 sampled transitions: one update of batch 32 per 4 env steps (Nature DQN)
            "training_intensity": 8,
            "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 100_000},
            "num_steps_sampled_before_learning_starts": 100_000,
            "target_network_update_freq": 1000,
            "tau": 1.0,
            "epsilon": [[0, 1.0], [1_000_000, 0.01]],
            "n_step": 1,
            "double_q": True,
            "dueling": False,
            "td_error_loss_fn": "huber",
        },
    },
}


def get_preset(algo: str, preset: str = "default") -> dict[str, Any]:
    """A copy of the hyperparameters of ``algo`` / ``preset``; ValueError naming the choices otherwise."""
    if algo not in PRESETS:
        raise ValueError(f"unknown algo {algo!r} for RLlib; choose one of {', '.join(ALGOS)}")
    if preset not in PRESETS[algo]:
        raise ValueError(f"unknown preset {preset!r} for {algo}; choose one of {', '.join(PRESETS[algo])}")
    import copy

    return copy.deepcopy(PRESETS[algo][preset])
