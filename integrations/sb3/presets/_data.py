"""The preset tables: plain data (numbers, strings, lists, dicts), one entry per (algo, name).

Conventions:
- Keys are SB3 constructor kwargs, plus ``n_envs`` (how many envs to run), ``n_timesteps`` (suggested
  budget) and ``policy``. The env already does frame stacking, so there is no ``frame_stack`` /
  ``env_wrapper`` key. The network is not part of a preset (``retrokit train --network``, or
  ``to_sb3_kwargs(preset, network=...)``); ``policy_kwargs.features_extractor_kwargs`` is passed to it.
- Linear schedules are strings ``"lin_<initial>"`` (rl-zoo3's notation): linear from ``initial`` at the
  start of training to 0 at the end. ``presets.schedule()`` turns them into SB3 callables;
  ``{"schedule": "linear", "initial": x, "final": y}`` is accepted too.
- ``policy_kwargs.net_arch`` is ``[]`` everywhere: the policy / value / Q heads are single linear layers on
  the CNN features, as in the Nature DQN, baselines and SB3's own ``CnnPolicy``. SB3 picks ``[]`` only when
  the extractor *is* its own ``NatureCNN`` class; with any other extractor (the kit's) it silently adds two
  64-unit tanh layers per head, which saturate on the CNN's ReLU features: PPO on Pong then stays at -21
  for 900k steps (measured). ``LINEAR_HEADS`` below is the one place this is set.
- Classes are dotted import paths (``"stable_baselines3...RMSpropTFLike"``), resolved by ``to_sb3_kwargs``.
"""

from __future__ import annotations

from typing import Any

COMPACT_BUFFER = "retro_atari_kit.integrations.sb3.buffers.CompactReplayBuffer"
# SB3's RolloutBuffer, but minibatches of frames come out channels-last without extra copies
CHANNELS_LAST_ROLLOUTS = "retro_atari_kit.integrations.sb3.rollout_buffer.ChannelsLastRolloutBuffer"
# SB3's ActorCriticCnnPolicy, but uint8 frames go to the kit's extractor without SB3's float division
KIT_CNN_POLICY = "retro_atari_kit.integrations.sb3.policies.KitCnnPolicy"
RMSPROP_TF_LIKE = "stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike"
# linear heads on the CNN features (see the module docstring)
LINEAR_HEADS: dict[str, Any] = {"net_arch": []}
# SB3's Adam for actor-critic policies (eps 1e-5), as one fused kernel over all parameters: the same update
# (float32, equal to the per-parameter loop within ~1e-7 after 30 steps); on this 2-core CPU an optimizer
# step of the Nature CNN policy takes 1.6 ms instead of 6.9 ms (16 steps per PPO rollout). torch >= 2.4.
FUSED_ADAM: dict[str, Any] = {"eps": 1e-5, "fused": True}

# ---------------------------------------------------------------------------------------------------------
# Defaults: the RL Zoo Atari hyperparameters (rl-baselines3-zoo hyperparams/{ppo,a2c,dqn,qrdqn}.yml, atari).
# ---------------------------------------------------------------------------------------------------------

PPO_DEFAULT: dict[str, Any] = {
    "policy": KIT_CNN_POLICY,
    "rollout_buffer_class": CHANNELS_LAST_ROLLOUTS,
    "n_envs": 8,
    "n_timesteps": 10_000_000,
    "n_steps": 128,
    "n_epochs": 4,
    "batch_size": 256,
    "learning_rate": "lin_2.5e-4",
    "clip_range": "lin_0.1",
    "vf_coef": 0.5,
    "ent_coef": 0.01,
    "policy_kwargs": {**LINEAR_HEADS, "optimizer_kwargs": FUSED_ADAM},
}

# The default with the CNN trunk under bf16 autocast where the hardware does bf16 natively (CUDA from
# Ampere on, x86 CPUs with AVX512-BF16 / AMX; float32 elsewhere). Heads, losses and optimizer stay float32
# (see the GPU presets' note on AMP). On this 2-core AVX512-BF16 CPU PPO runs ~1.25x faster than with the
# float32 default. Opt-in, not the default: in 2M-step Pong runs, two seeds each (docs/results.md), both
# bf16 runs flattened in the last quarter and ended below both float32 runs.
PPO_BF16: dict[str, Any] = {
    **PPO_DEFAULT,
    "policy_kwargs": {**PPO_DEFAULT["policy_kwargs"], "features_extractor_kwargs": {"autocast": "bf16"}},
}

A2C_DEFAULT: dict[str, Any] = {
    "policy": KIT_CNN_POLICY,
    "rollout_buffer_class": CHANNELS_LAST_ROLLOUTS,
    "n_envs": 16,
    "n_timesteps": 10_000_000,
    "ent_coef": 0.01,
    "vf_coef": 0.25,
    # RMSprop as TensorFlow implements it (eps inside the square root), eps 1e-5: A2C's Atari setup
    "policy_kwargs": {**LINEAR_HEADS, "optimizer_class": RMSPROP_TF_LIKE, "optimizer_kwargs": {"eps": 1e-5}},
}

DQN_DEFAULT: dict[str, Any] = {
    "policy": "CnnPolicy",
    "n_envs": 1,
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
    # the zoo sets optimize_memory_usage False (SB3 refuses it with time-limit handling); the kit's compact
    # buffer stores each frame once and gives the same samples: 100k transitions ~0.7 GB instead of ~5.6 GB
    "optimize_memory_usage": False,
    "replay_buffer_class": COMPACT_BUFFER,
    "policy_kwargs": {**LINEAR_HEADS},
}

QRDQN_DEFAULT: dict[str, Any] = {
    "policy": "CnnPolicy",
    "n_envs": 1,
    "n_timesteps": 10_000_000,
    "exploration_fraction": 0.025,
    "buffer_size": 100_000,
    "optimize_memory_usage": False,
    "replay_buffer_class": COMPACT_BUFFER,
    "policy_kwargs": {**LINEAR_HEADS},
}

# ---------------------------------------------------------------------------------------------------------
# The seed project's Pong DQN: reaches +18..21 on Pong in ~0.5-1M steps on one env.
# ---------------------------------------------------------------------------------------------------------

DQN_PONG: dict[str, Any] = {
    "policy": "CnnPolicy",
    "n_envs": 1,
    # epsilon goes 1.0 -> 0.02 over the first 100k steps: exploration_fraction is a fraction of the
    # budget, 0.1 of 1M. Keep the product at 100k if you change n_timesteps (e.g. 2M -> 0.05).
    "n_timesteps": 1_000_000,
    "buffer_size": 100_000,
    "learning_starts": 10_000,  # 10k random-policy transitions prefill the buffer
    "exploration_initial_eps": 1.0,
    "exploration_final_eps": 0.02,
    "exploration_fraction": 0.1,
    "target_update_interval": 1000,  # hard target sync every 1k steps
    "learning_rate": 1e-4,  # Adam (SB3's DQN default optimizer)
    "batch_size": 32,
    "gamma": 0.99,
    "train_freq": 1,  # the seed trained on every step
    "gradient_steps": 1,
    "optimize_memory_usage": False,
    "replay_buffer_class": COMPACT_BUFFER,
    "policy_kwargs": {**LINEAR_HEADS},
}

# The same DQN with two of the reference's speed-ups (issue 18; docs/performance.md): 4 env steps per
# update with a 4x batch (the same 32 samples per env step: train_freq 4, batch 128), and env play in its
# own process (``parallel_play``, integrations/sb3/parallel_play): the player runs at most one rollout ahead
# of the synchronous schedule, so the updates per env step stay exactly those of train_freq 4.
DQN_PONG_FAST: dict[str, Any] = {
    **DQN_PONG,
    "train_freq": 4,
    "batch_size": 128,
    "parallel_play": {"ahead": None, "weights_every": None},  # ahead: one rollout; weights after every update
}

# ---------------------------------------------------------------------------------------------------------
# GPU presets. Reasoning:
# - On a GPU the network is cheap per sample; env stepping on the CPU is the bottleneck, so run more envs
#   and feed bigger batches. Keep the number of minibatches / updates per sample of the zoo settings, so
#   the learning dynamics stay close to the tuned defaults (only the batch gets bigger).
# - Frames go to the GPU as uint8 (4x fewer bytes than float32) and are divided once there; the extractors
#   use channels-last weights and activations (the tensor-core friendly layout for convs).
# - AMP: SB3's train loops have no autocast / GradScaler hook, so mixed precision can only live inside
#   the feature extractor, as bfloat16 autocast (``features_extractor_kwargs.autocast: bf16``): the conv
#   trunk runs in bf16, its output is cast back to float32, so the heads, the losses (log-probs, value and
#   TD targets) and the optimizer stay float32. bf16 has float32's exponent range, so no loss scaling is
#   needed; it takes effect only on hardware with native bf16 (GPUs from Ampere on, CPUs with AVX512-BF16
#   or AMX). It is NOT on in these presets: both learning runs with it (PPO, Pong, 2M steps, seeds 0 and 1,
#   on this AVX512-BF16 CPU; docs/results.md) ended below both float32 runs, and on a GPU the network is not
#   the bottleneck anyway (see above). Opt in with the PPO ``bf16`` preset or
#   ``--set policy_kwargs.features_extractor_kwargs.autocast=bf16``. Never for DQN/QR-DQN, whose argmax
#   over close Q-values is the most precision-sensitive.
# ---------------------------------------------------------------------------------------------------------

PPO_GPU: dict[str, Any] = {
    **PPO_DEFAULT,
    "n_envs": 32,  # 32 x 128 = 4096 samples per rollout
    "batch_size": 1024,  # 4 minibatches per epoch, as the zoo's 1024 / 256
}

A2C_GPU: dict[str, Any] = {
    **A2C_DEFAULT,
    "n_envs": 64,  # 64 x 5 = 320 samples per update instead of 80
}

DQN_GPU: dict[str, Any] = {
    **DQN_DEFAULT,
    # 4 envs stepped together; train_freq 1 x 4 envs = one gradient step per 4 transitions, the zoo's ratio
    "n_envs": 4,
    "train_freq": 1,
    # the Nature DQN's 1M-transition replay: ~7 GB of RAM with the compact buffer (SB3's needs ~56 GB)
    "buffer_size": 1_000_000,
}

QRDQN_GPU: dict[str, Any] = {
    **QRDQN_DEFAULT,
    "n_envs": 4,
    "train_freq": 1,
    "buffer_size": 1_000_000,
}

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {"default": PPO_DEFAULT, "bf16": PPO_BF16, "gpu": PPO_GPU},
    "a2c": {"default": A2C_DEFAULT, "gpu": A2C_GPU},
    "dqn": {"default": DQN_DEFAULT, "gpu": DQN_GPU, "pong-dqn": DQN_PONG, "pong-dqn-fast": DQN_PONG_FAST},
    "qrdqn": {"default": QRDQN_DEFAULT, "gpu": QRDQN_GPU},
}

DESCRIPTIONS: dict[str, str] = {
    "default": "RL Zoo Atari hyperparameters",
    "bf16": "the default with the CNN in bf16 autocast where the hardware has native bf16 (opt-in)",
    "gpu": "more envs, bigger batches (float32; see presets/_data.py on AMP)",
    "pong-dqn": "the seed's Pong DQN: 100k buffer, 10k prefill, eps 1.0 -> 0.02 over 100k steps",
    "pong-dqn-fast": "pong-dqn with 4 steps per update (batch 128) and env play in its own process",
}
