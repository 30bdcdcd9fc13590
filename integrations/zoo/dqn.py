"""rl-zoo3 hyperparameters for DQN on every RetroKit ID (the zoo's Atari settings, without its wrappers).

``--conf-file retro_atari_kit.integrations.zoo.dqn``. The replay buffer holds uint8 frame stacks:
100k transitions take ~5.6 GB (obs and next obs); lower ``buffer_size`` with ``--hyperparams`` on
small machines.
"""

from retro_atari_kit.integrations.zoo import hyperparams_for_all

DQN_ATARI = {
    "policy": "CnnPolicy",
    "n_timesteps": 10_000_000,
    "buffer_size": 100_000,
    "learning_rate": 1e-4,
    "batch_size": 32,
    "learning_starts": 100_000,
    "target_update_interval": 1000,
    "train_freq": 4,
    "gradient_steps": 1,
    "exploration_fraction": 0.1,
    "exploration_final_eps": 0.01,
    "optimize_memory_usage": False,
}

hyperparams = hyperparams_for_all(DQN_ATARI)
