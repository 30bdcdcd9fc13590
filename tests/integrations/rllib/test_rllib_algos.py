"""RLlib with the kit's module on a real local Ray (2 CPUs) and the real ALE emulator: PPO, APPO, DQN and the
Impala network train; what the module receives and what its first conv sees is recorded by forward hooks
on the env runner (a separate Ray worker process) and on the learner (in this process)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import ray
from retro_atari_kit.integrations.rllib import algo_config
from retro_atari_kit.integrations.rllib.callbacks import TRUE_SCORE
from retro_atari_kit.integrations.rllib.logs import finished_games

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"
# games of 40 agent steps, so true scores are reported within two small iterations
SHORT_GAMES = {"max_episode_steps": 40}
SMALL = dict(num_env_runners=1, num_envs_per_env_runner=2, rollout_fragment_length=32, env_kwargs=SHORT_GAMES)


@pytest.fixture
def local_ray():
    # a fresh Ray per test: an asynchronous algorithm's actors may still hold the CPUs after algo.stop().
    # address="local": its own Ray, as `retrokit train` starts one, even beside another job's cluster on
    # this host (a plain ray.init() joins that one, found through RAY_ADDRESS or the last `ray start`, and
    # then refuses num_cpus)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="warning")
    yield
    ray.shutdown()


def install_hooks(module) -> None:
    """Record the encoder's input (dtype, shape) and the first conv's input (dtype, min, max) per call."""
    import torch

    module.seen = []
    first_conv = next(m for m in module.encoder.modules() if isinstance(m, torch.nn.Conv2d))

    def on_input(_mod, args):
        module.seen.append(("input", str(args[0].dtype), tuple(args[0].shape)))

    def on_conv(_mod, args):
        x = args[0]
        module.seen.append(("conv", str(x.dtype), float(x.min()), float(x.max())))

    module.encoder.register_forward_pre_hook(on_input)
    first_conv.register_forward_pre_hook(on_conv)


def hook_everywhere(algo) -> None:
    # defined inside: Ray ships the closure by value to the runner process
    def on_runner(runner):
        install = install_hooks
        install(runner.module)

    algo.env_runner_group.foreach_env_runner(on_runner, local_env_runner=False)
    algo.learner_group.foreach_learner(lambda learner: install_hooks(learner.module["default_policy"]))


def seen_by(algo) -> tuple[list, list]:
    runner = algo.env_runner_group.foreach_env_runner(lambda r: r.module.seen, local_env_runner=False)[0]
    learner = [
        r.get() for r in algo.learner_group.foreach_learner(lambda lr: lr.module["default_policy"].seen)
    ][0]
    return runner, learner


def assert_uint8_once(records: list, where: str) -> None:
    inputs = [r for r in records if r[0] == "input"]
    convs = [r for r in records if r[0] == "conv"]
    assert inputs and convs, f"no forward pass on the {where}"
    for _, dtype, shape in inputs:
        assert dtype == "torch.uint8" and shape[1:] == (4, 84, 84), (where, dtype, shape)
    for _, dtype, lo, hi in convs:
        assert dtype == "torch.float32"
        # in [0, 1]; a second /255 would leave the max at most 1/255, none would leave it above 1
        assert 0.0 <= lo and 0.3 < hi <= 1.0, (where, lo, hi)


def train_until(algo, ok, within_s: float = 180.0) -> list[dict]:
    # bounded by time, not by iterations: on a loaded machine the asynchronous learners (APPO, IMPALA) may
    # need many short iterations before their first update
    results = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        results.append(algo.train())
        if ok(results):
            break
    return results


def games_of(results: list[dict]) -> list:
    return [g for r in results for g in finished_games(r)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo_name", ["ppo", "appo", "impala"])
def test_uint8_in_normalised_once_and_true_scores(local_ray, algo_name):
    extra = (
        dict(minibatch_size=32, num_epochs=1)
        if algo_name == "ppo"
        else dict(train_batch_size_per_learner=32, min_time_s_per_iteration=1, broadcast_interval=1)
    )
    algo = algo_config(algo_name, ENV, **SMALL, **extra).build_algo()
    try:
        hook_everywhere(algo)

        def done(results):
            learned = any(r.get("learners", {}).get("default_policy") for r in results)
            # APPO / IMPALA learn asynchronously: wait until the hooked learner module has run an update
            return learned and games_of(results) and len(results) >= 2 and all(seen_by(algo))

        results = train_until(algo, done)
        runner, learner = seen_by(algo)
        assert_uint8_once(runner, "env runner")
        assert_uint8_once(learner, "learner")
        stats = (
            results[-1]["learners"]["default_policy"]
            if algo_name == "ppo"
            else next(
                r["learners"]["default_policy"]
                for r in results
                if r.get("learners", {}).get("default_policy")
            )
        )
        assert math.isfinite(stats["total_loss"])
        games = games_of(results)
        # true games: the 40-step time limit ends them (RLlib's own episodes here end at life losses too)
        assert games and all(length == 40 for _, _, length in games)
        assert {rank for rank, _, _ in games} <= {0, 1}
        scores = [r["env_runners"][TRUE_SCORE] for r in results if TRUE_SCORE in r.get("env_runners", {})]
        assert scores and all(-21 <= s <= 21 for s in scores)
    finally:
        algo.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("single_frame_replay", [True, False], ids=["single-frames", "env-stacks"])
def test_dqn_trains_with_uint8_replay(local_ray, single_frame_replay):
    cfg = algo_config(
        "dqn",
        ENV,
        num_env_runners=0,
        num_envs_per_env_runner=1,
        rollout_fragment_length=4,
        num_steps_sampled_before_learning_starts=64,
        min_sample_timesteps_per_iteration=96,
        training_intensity=8,
        dueling=True,
        single_frame_replay=single_frame_replay,
        env_kwargs=SHORT_GAMES,
    )
    algo = cfg.build_algo()
    try:
        module = algo.learner_group._learner.module["default_policy"]
        acting = algo.env_runner.module  # the local runner (num_env_runners=0)
        install_hooks(module)
        install_hooks(acting)
        before = module.af.weight.detach().clone()
        results = [algo.train() for _ in range(2)]
        # the module acts and learns on (B, 4, 84, 84) uint8 stacks either way
        assert_uint8_once(acting.seen, "env runner")
        assert_uint8_once(module.seen, "learner")
        assert math.isfinite(results[-1]["learners"]["default_policy"]["qf_loss"])
        assert not np.allclose(before.numpy(), module.af.weight.detach().numpy()), "no gradient step"
        assert hasattr(module, "vf"), "dueling=True must add the value stream"
        buffer = algo.local_replay_buffer
        episodes = list(buffer.episodes)
        assert episodes
        stored = (1, 84, 84) if single_frame_replay else (4, 84, 84)  # what a step costs in replay
        for ep in episodes:
            obs = np.asarray(ep.get_observations())
            assert obs.dtype == np.uint8 and obs.shape[1:] == stored
        assert games_of(results)
    finally:
        algo.stop()


@pytest.mark.timeout(300)
def test_impala_network_builds_and_trains_one_step(local_ray):
    from retro_atari_kit.models import ImpalaCNN

    cfg = algo_config("ppo", ENV, network="impala", **SMALL, minibatch_size=64, num_epochs=1)
    algo = cfg.build_algo()
    try:
        module = algo.learner_group._learner.module["default_policy"]
        assert isinstance(module.encoder, ImpalaCNN)
        before = [p.detach().clone() for p in module.encoder.parameters()]
        result = algo.train()
        assert math.isfinite(result["learners"]["default_policy"]["total_loss"])
        changed = [
            not np.allclose(b.numpy(), p.detach().numpy())
            for b, p in zip(before, module.encoder.parameters(), strict=True)
        ]
        assert all(changed), "every Impala layer gets a gradient step"
    finally:
        algo.stop()
