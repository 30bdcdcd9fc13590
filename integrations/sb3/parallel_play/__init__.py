"""Parallel play for DQN / QR-DQN: the envs run in their own process while the trainer trains.

::

    from stable_baselines3 import DQN
    from retro_atari_kit.integrations.sb3.parallel_play import make_play_env, parallel_play_class
    venv = make_play_env("RetroKit/Pong-v0", n_envs=1, seed=0, monitor_dir="monitor")
    model = parallel_play_class(DQN)("CnnPolicy", venv, train_freq=4, batch_size=128)
    model.learn(1_000_000)
    venv.close()

or ``retrokit train dqn RetroKit/Pong-v0 --preset pong-dqn-fast`` (any DQN / QR-DQN preset with
``--set parallel_play=true``). ``retrokit train`` plays in parallel only when the learner is on a CUDA
device (option ``when: cuda``, the default): on a CPU learner the updates take the cores the player would
need, so the run trains synchronously with the same schedule and says so in one line; ``when: always``
plays in parallel on any device.

Processes: the trainer (SB3's ``learn()`` loop, the replay buffer, the optimizer, checkpoints, logs) and one
play process (the envs, an epsilon-greedy CPU copy of the Q-network, ``monitor/*.monitor.csv`` with the true
scores). They share a ring of the last steps (``ring.py``: one uint8 frame per transition, as the compact
replay stores it; no frame is pickled) and a flat weights buffer. The trainer adds each step to its replay
buffer as SB3 does, so sampling never races the player, and checkpoints and ``--resume`` of the replay are
those of the synchronous path.

Sync rule (``algo.py``): the player may run at most ``ahead`` vector steps (default: one rollout,
``train_freq``) past the synchronous schedule, so the updates per env step are exactly the synchronous ones.
Weights go to the player after every round of updates (``weights_every`` agent steps if set).
A player that dies raises :class:`PlayerDiedError` (one line naming it) in the trainer within ~0.2 s of the
trainer next needing a step; closing the env (or the trainer exiting) stops the player.
"""

from __future__ import annotations

from .algo import (
    ParallelPlayMixin,
    active_play_options,
    check_parallel_play,
    parallel_play_class,
    parse_options,
    play_class_and_env,
    play_pays,
)
from .venv import PlayerDiedError, PlayProcessVecEnv, make_play_env

__all__ = [
    "ParallelPlayMixin",
    "PlayProcessVecEnv",
    "active_play_options",
    "PlayerDiedError",
    "check_parallel_play",
    "make_play_env",
    "parallel_play_class",
    "parse_options",
    "play_class_and_env",
    "play_pays",
]
