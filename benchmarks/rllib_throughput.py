"""RLlib training throughput and memory: the kit on RLlib vs RLlib's own Atari stack vs the kit on SB3.

Contenders (Pong, same algorithm, same env runners and envs per runner, same batch sizes):

- ``kit-rllib``: ``algo_config(algo, "RetroKit/Pong-v0")``: the kit's vector env on the runner (uint8
  (4, 84, 84)), ``KitRLModule`` (Nature CNN, channels-last, /255 once in the module).
- ``rllib``: RLlib's Atari example stack (``rllib/examples/algorithms/{ppo/atari_ppo,appo/pong_appo}.py``):
  ``wrap_atari_for_new_api_stack(gym.make("ale_py:ALE/Pong-v5"), framestack=None)`` (float32 in [-1, 1],
  64x64), ``FrameStackingEnvToModule`` / ``FrameStackingLearner(4)``, RLlib's default CNN with the
  example's filters, RLlib's SYNC vectorisation, ``clip_rewards=True``.
- ``kit-sb3`` (PPO only): the kit's SB3 PPO (``make_vec_env`` + ``get_preset("ppo")``) with the same number
  of envs.

Reported per contender: env steps/s during training (after warm-up, sampling + updates, wall time), bytes
per observation in a train batch (the learner module's input space: what every batch row costs), and peak
RSS of the driver plus its env-runner processes (and their children). ``--rounds`` alternates the contenders
(medians of the rounds and of the per-round ratios, ``benchmarks/harness.py``). Run by hand, never in CI::

    python benchmarks/rllib_throughput.py --algo ppo --runners 1 --envs 4
    python benchmarks/rllib_throughput.py --algo appo --runners 1 --envs 4
    python benchmarks/rllib_throughput.py --algo appo --only kit-rllib --runners 1 2 --envs 4
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402

PPO_BATCH = dict(rollout_fragment_length=128, minibatch_size=256, num_epochs=4)
APPO_BATCH = dict(rollout_fragment_length=50, train_batch_size_per_learner=500)


def _training(algo: str, runners: int, envs: int) -> dict:
    if algo == "ppo":
        return {
            **PPO_BATCH,
            "train_batch_size_per_learner": PPO_BATCH["rollout_fragment_length"] * envs * runners,
        }
    return dict(APPO_BATCH)


def kit_rllib(algo: str, runners: int, envs: int):
    from retro_atari_kit.integrations.rllib import algo_config

    cfg = algo_config(
        algo,
        "RetroKit/Pong-v0",
        num_env_runners=runners,
        num_envs_per_env_runner=envs,
        **_training(algo, runners, envs),
    )
    return cfg.build_algo()


def rllib_stack(algo: str, runners: int, envs: int):
    import gymnasium as gym
    from ray.rllib.connectors.env_to_module.frame_stacking import FrameStackingEnvToModule
    from ray.rllib.connectors.learner.frame_stacking import FrameStackingLearner
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env
    from retro_atari_kit.integrations.rllib.config import config_class

    def creator(cfg):
        from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

        env = gym.make(
            "ale_py:ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0, full_action_space=False
        )
        return wrap_atari_for_new_api_stack(env, framestack=None)

    register_env("rllib-atari-pong", creator)
    train = _training(algo, runners, envs)
    fragment = train.pop("rollout_fragment_length")
    cfg = (
        config_class(algo)()
        .environment("rllib-atari-pong", clip_rewards=True)
        .env_runners(
            num_env_runners=runners,
            num_envs_per_env_runner=envs,
            rollout_fragment_length=fragment,
            env_to_module_connector=lambda env, spaces=None, device=None: FrameStackingEnvToModule(
                num_frames=4
            ),
        )
        .learners(num_learners=0)
        .training(learner_connector=lambda obs_space, act_space: FrameStackingLearner(num_frames=4), **train)
        .rl_module(
            model_config=DefaultModelConfig(
                vf_share_layers=True,
                conv_filters=[[16, 4, 2], [32, 4, 2], [64, 4, 2], [128, 4, 2]],
                conv_activation="relu",
                head_fcnet_hiddens=[256],
            )
        )
    )
    return cfg.build_algo()


def _rss_of(pids: list[int]) -> int:
    import psutil

    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            total += proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
        except psutil.Error:
            pass
    return total


def measure_rllib(make, algo: str, runners: int, envs: int, seconds: float, warmup: float) -> dict:
    import ray
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    ray.init(address="local", num_cpus=max(runners, 1) + 1, include_dashboard=False, logging_level="error")
    try:
        trainer = make(algo, runners, envs)
        pids = [
            os.getpid(),
            *trainer.env_runner_group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False),
        ]
        space = trainer.learner_group._learner.module["default_policy"].observation_space
        key = (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME)

        def steps() -> int:
            return int(trainer.metrics.peek(key, default=0) or 0)

        t_end = time.perf_counter() + warmup
        while time.perf_counter() < t_end or steps() == 0:
            trainer.train()
        peak, s0, t0 = 0, steps(), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            trainer.train()
            peak = max(peak, _rss_of(pids))
        sps = (steps() - s0) / (time.perf_counter() - t0)
        # sampling alone (env + module inference on the runners, no learner): where the stacks differ most
        n = 512 * envs

        def sample(runner):
            return sum(len(e) for e in runner.sample(num_timesteps=n, random_actions=False))

        trainer.env_runner_group.foreach_env_runner(sample, local_env_runner=False)  # warm-up
        t1 = time.perf_counter()
        sampled = sum(trainer.env_runner_group.foreach_env_runner(sample, local_env_runner=False))
        sample_sps = sampled / (time.perf_counter() - t1)
        trainer.stop()
    finally:
        ray.shutdown()
    return {
        "sps": sps,
        "sample_sps": sample_sps,
        "obs_bytes": int(np.prod(space.shape)) * space.dtype.itemsize,
        "obs": f"{space.dtype} {tuple(space.shape)}",
        "rss": peak,
    }


def measure_sb3(runners: int, envs: int, seconds: float, warmup: float) -> dict:
    from retro_atari_kit.integrations.sb3 import make_vec_env
    from retro_atari_kit.integrations.sb3.presets import get_preset, to_sb3_kwargs
    from stable_baselines3 import PPO

    preset = get_preset("ppo")
    n = runners * envs
    preset.update(
        n_envs=n,
        n_steps=PPO_BATCH["rollout_fragment_length"],
        batch_size=PPO_BATCH["minibatch_size"],
        n_epochs=PPO_BATCH["num_epochs"],
    )
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=n, seed=0)
    model = PPO(env=venv, device="cpu", seed=0, **to_sb3_kwargs(preset, network="nature"))
    rollout = model.n_steps * n
    model.learn(rollout * max(1, int(warmup // 5)))
    t0, done, peak = time.perf_counter(), 0, 0
    while time.perf_counter() - t0 < seconds:
        model.learn(rollout, reset_num_timesteps=False)
        done += rollout
        peak = max(peak, _rss_of([os.getpid()]))
    sps = done / (time.perf_counter() - t0)
    venv.close()
    return {
        "sps": sps,
        "sample_sps": None,
        "obs_bytes": int(np.prod(venv.observation_space.shape)),
        "obs": "uint8 (4, 84, 84)",
        "rss": peak,
    }


def main(argv: list[str] | None = None) -> None:
    p = harness.parser(__doc__)
    harness.add_common_options(p, rounds=1, quick="2 envs, 1 s measured after the shortest warm-up")
    p.add_argument("--algo", choices=["ppo", "appo"], default="ppo")
    p.add_argument("--runners", type=int, nargs="+", default=[1], help="env runners (one run per value)")
    p.add_argument("--envs", type=int, default=4, help="envs per runner")
    p.add_argument("--seconds", type=float, default=60.0, help="measured wall time per contender")
    p.add_argument("--warmup", type=float, default=15.0, help="unmeasured training seconds first")
    p.add_argument("--only", nargs="+", default=None, help="contenders: kit-rllib rllib kit-sb3")
    args = p.parse_args(argv)
    if args.quick:
        args.envs, args.seconds, args.warmup = 2, 1.0, 0.0
    names = args.only or (["kit-rllib", "rllib", "kit-sb3"] if args.algo == "ppo" else ["kit-rllib", "rllib"])

    def cell(name: str, runners: int) -> dict:
        if name == "kit-sb3":
            return measure_sb3(runners, args.envs, args.seconds, args.warmup)
        make = kit_rllib if name == "kit-rllib" else rllib_stack
        return measure_rllib(make, args.algo, runners, args.envs, args.seconds, args.warmup)

    def show(key: tuple[str, int], r: dict) -> str:
        sampling = "n/a" if r["sample_sps"] is None else f"{r['sample_sps']:.0f} steps/s"
        return (
            f"{key[0]:9s} runners {key[1]}: {r['sps']:7.1f} env steps/s  obs in batch {r['obs']:>22s} = "
            f"{r['obs_bytes']:6d} B   peak RSS {r['rss'] / 2**20:7.0f} MiB   sampling alone {sampling}"
        )

    cells = {
        (name, runners): (lambda name=name, runners=runners: cell(name, runners))
        for runners in args.runners
        for name in names
    }
    samples = harness.alternate(cells, args.rounds, show=show)
    report = harness.Report()
    report.add(
        f"## {args.algo.upper()} Pong, {args.envs} envs per runner, {args.seconds:.0f} s measured per "
        f"contender (median of {samples.rounds} rounds)",
        "",
    )
    rows = []
    for name, runners in cells:
        last = samples.values[(name, runners)][max(samples.values[(name, runners)])]  # the fixed figures
        rows.append(
            [
                name,
                runners,
                harness.num(samples.median((name, runners), "sps")),
                harness.num(samples.median((name, runners), "sample_sps")),
                f"{last['obs']} = {last['obs_bytes']:,d} B",
                f"{samples.median((name, runners), 'rss') / 2**20:,.0f}",
            ]
        )
    report.table(
        [
            "contender",
            "runners",
            "env steps/s",
            "sampling alone, steps/s",
            "obs in a batch row",
            "peak RSS, MiB",
        ],
        rows,
    )
    rows = []
    for runners in args.runners:
        kit, own = ("kit-rllib", runners), ("rllib", runners)
        if kit in cells and own in cells:
            obs = samples.median(own, "obs_bytes") / samples.median(kit, "obs_bytes")
            rows.append(
                [
                    runners,
                    harness.ratio(samples.median_ratio(kit, own, "sps")),
                    harness.ratio(samples.median_ratio(kit, own, "sample_sps")),
                    harness.ratio(obs),
                ]
            )
    if rows:
        report.table(
            [
                "runners",
                "kit-rllib / rllib, training",
                "kit-rllib / rllib, sampling alone",
                "rllib / kit, obs bytes",
            ],
            rows,
        )
    if len(args.runners) > 1 and all(("kit-rllib", r) in cells for r in args.runners):
        first = ("kit-rllib", args.runners[0])
        report.table(
            ["kit-rllib runners", f"env steps/s / {args.runners[0]} runner(s)"],
            [
                [r, harness.ratio(samples.median_ratio(("kit-rllib", r), first, "sps"))]
                for r in args.runners[1:]
            ],
        )
    report.write(args.out)


if __name__ == "__main__":
    main()
