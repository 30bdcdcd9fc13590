"""RLlib memory and module cost: DQN replay bytes per transition, and KitRLModule's memory format.

``replay``: fill RLlib's ``EpisodeReplayBuffer`` with ``--steps`` random-policy Pong transitions (no
learning) and count the bytes of the stored observations per transition, for

- ``kit``: ``algo_config("dqn", "RetroKit/Pong-v0")`` as shipped (``single_frame_replay``): one uint8
  (1, 84, 84) frame per step, stacked by the kit's connector and replay buffer;
- ``kit-stacks``: the same with ``single_frame_replay=False``: uint8 (4, 84, 84) frame stacks, as the env
  emits them;
- ``rllib``: RLlib's Atari DQN example stack (``rllib/examples/algorithms/dqn/atari_dqn.py``):
  ``wrap_atari_for_new_api_stack(..., framestack=None)`` (float32 64x64 single frames) with the
  frame-stacking connectors.

The floor is one uint8 84x84 frame per transition (7,056 B: 7 GB per 1M transitions).

``format``: one PPO-style training step (forward, value, backward) of ``KitRLModule`` on a uint8 batch,
channels-last vs contiguous weights and activations, alternating, median of ``--repeats``.

Run by hand, never in CI::

    python benchmarks/rllib_memory.py replay --steps 5000
    python benchmarks/rllib_memory.py format --batch 256
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

FLOOR = 84 * 84


def _kit_dqn(capacity: int, single_frame_replay: bool = True):
    from retro_atari_kit.integrations.rllib import algo_config

    return algo_config(
        "dqn", "RetroKit/Pong-v0", num_env_runners=0, num_steps_sampled_before_learning_starts=10**9,
        min_sample_timesteps_per_iteration=500, replay_buffer_config={"type": "EpisodeReplayBuffer",
                                                                       "capacity": capacity},
        single_frame_replay=single_frame_replay,
    ).build_algo()  # fmt: skip


def _kit_stacks_dqn(capacity: int):
    return _kit_dqn(capacity, single_frame_replay=False)


def _rllib_dqn(capacity: int):
    import gymnasium as gym
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.connectors.env_to_module.frame_stacking import FrameStackingEnvToModule
    from ray.rllib.connectors.learner.frame_stacking import FrameStackingLearner
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    def creator(cfg):
        from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

        env = gym.make(
            "ale_py:ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0, full_action_space=False
        )
        return wrap_atari_for_new_api_stack(env, dim=64, framestack=None)

    register_env("rllib-atari-pong", creator)
    return (
        DQNConfig()
        .environment("rllib-atari-pong", clip_rewards=True)
        .env_runners(num_env_runners=0, rollout_fragment_length=4,
                     env_to_module_connector=lambda env, spaces=None, device=None: FrameStackingEnvToModule(
                         num_frames=4))
        .training(learner_connector=lambda o, a: FrameStackingLearner(num_frames=4),
                  num_steps_sampled_before_learning_starts=10**9,
                  replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": capacity})
        .reporting(min_sample_timesteps_per_iteration=500)
        .rl_module(model_config=DefaultModelConfig(
            conv_filters=[[16, 4, 2], [32, 4, 2], [64, 4, 2], [128, 4, 2]], conv_activation="relu",
            head_fcnet_hiddens=[256]))
        .build_algo()
    )  # fmt: skip


def replay(steps: int) -> None:
    import ray

    print(f"replay memory after {steps} random-policy Pong transitions (EpisodeReplayBuffer)")
    for name, make in (("kit", _kit_dqn), ("kit-stacks", _kit_stacks_dqn), ("rllib", _rllib_dqn)):
        ray.init(num_cpus=2, include_dashboard=False, logging_level="error")
        try:
            algo = make(capacity=steps * 2)
            buffer = algo.local_replay_buffer
            while buffer.get_num_timesteps() < steps:
                algo.train()
            obs_bytes, dtype, shape = 0, None, None
            for ep in buffer.episodes:
                obs = np.asarray(ep.get_observations())
                obs_bytes, dtype, shape = obs_bytes + obs.nbytes, obs.dtype, obs.shape[1:]
            per = obs_bytes / buffer.get_num_timesteps()
            print(
                f"  {name:10s} stores {dtype} {shape}: {per:8.0f} B per transition = {per / FLOOR:.2f}x the "
                f"7,056 B floor; 1M transitions: {per * 1e6 / 1e9:.1f} GB",
                flush=True,
            )
            algo.stop()
        finally:
            ray.shutdown()


def module_format(batch: int, repeats: int) -> None:
    import gymnasium as gym
    import torch
    from ray.rllib.core.columns import Columns
    from retro_atari_kit.integrations.rllib import KitRLModule

    obs_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    x = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)
    modules = {
        f"channels_last={cl}": KitRLModule(
            observation_space=obs_space,
            action_space=gym.spaces.Discrete(6),
            model_config={"network": "nature", "channels_last": cl},
        )
        for cl in (True, False)
    }
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-4) for k, m in modules.items()}

    def step(name: str) -> float:
        module, opt = modules[name], opts[name]
        t0 = time.perf_counter()
        out = module.forward_train({Columns.OBS: x})
        loss = (
            out[Columns.ACTION_DIST_INPUTS].logsumexp(-1).mean()
            + module.compute_values({Columns.OBS: x}, out[Columns.EMBEDDINGS]).pow(2).mean()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    times: dict[str, list[float]] = {k: [] for k in modules}
    for k in modules:
        step(k)  # warm-up
    for _ in range(repeats):
        for k in modules:
            times[k].append(step(k))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"KitRLModule (Nature) train step, batch {batch} uint8, torch threads {torch.get_num_threads()}")
    for k, v in med.items():
        print(f"  {k:20s} {v * 1000:7.1f} ms")
    print(f"  contiguous / channels-last = {med['channels_last=False'] / med['channels_last=True']:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("replay", help="DQN replay bytes per transition: kit vs RLlib's Atari stack")
    r.add_argument("--steps", type=int, default=5000)
    f = sub.add_parser("format", help="KitRLModule train step: channels-last vs contiguous")
    f.add_argument("--batch", type=int, default=256)
    f.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    if args.what == "replay":
        replay(args.steps)
    else:
        module_format(args.batch, args.repeats)


if __name__ == "__main__":
    main()
