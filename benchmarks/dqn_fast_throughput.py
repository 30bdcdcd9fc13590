"""DQN on Pong, the reference's speed-up table: training steps/s after learning starts.

Contenders (all with the reference's hyperparameters: Adam 1e-4, gamma 0.99, target sync every 1k steps,
100k replay, 32 samples per env step, one env; only ``learning_starts`` is lowered so that the measured
window is all training):

- ``sb3``: plain SB3, ``make_atari_env("PongNoFrameskip-v4")`` + ``VecFrameStack(4)`` + ``DQN("CnnPolicy")``
  with SB3's ``ReplayBuffer``, one env step + one batch of 32 per iteration;
- ``kit``: the kit's synchronous ``pong-dqn`` preset (``make_vec_env``, Nature CNN, ``CompactReplayBuffer``,
  fused Adam); ``kit-unfused``: the same with torch's default (per-weight) Adam;
- ``kit-steps<k>``: the same with ``train_freq=k`` and ``batch_size=32k`` (change 1; same samples per step);
- ``par-steps<k>``: ``kit-steps<k>`` with env play in its own process (change 2; ``pong-dqn-fast`` is k=4).

Each round builds every contender afresh, fills ``--learning-starts`` random steps (not timed), then times
``--steps`` training steps; contenders take turns within a round, so slow spells hit all of them; medians
of ``--rounds`` and of the per-round ratios (``benchmarks/harness.py``).

``--profile`` instead times the parts of one step on their own (env step, action, replay add / sample, one
update per batch size), the numbers behind the "where the time goes" table of docs/performance.md.

Run by hand, never in CI::

    python benchmarks/dqn_fast_throughput.py --repeats 3
    python benchmarks/dqn_fast_throughput.py --profile
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402

BASE_BATCH = 32


KIT_DQN_POLICY = "retro_atari_kit.integrations.sb3.policies.KitDQNPolicy"


def _kit_kwargs(
    steps: int, learning_starts: int, parallel: bool, policy: str | None = None, overrides: dict | None = None
) -> dict:
    """``pong-dqn`` (or ``pong-dqn-fast`` for the parallel path) with ``steps`` steps per update
    (``overrides``: further preset values, e.g. a smaller ``buffer_size``)."""
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs

    over = {"learning_starts": learning_starts, "train_freq": steps, "batch_size": BASE_BATCH * steps}
    over.update(overrides or {})
    if policy is not None:
        over["policy"] = policy
    preset = apply_overrides(get_preset("dqn", "pong-dqn-fast" if parallel else "pong-dqn"), over)
    kw = to_sb3_kwargs(preset, network="nature")
    kw.pop("parallel_play", None)
    return kw


def make_sb3(learning_starts: int, device: str = "cpu", overrides: dict | None = None):
    import ale_py
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    venv = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=0), n_stack=4)
    kw = _kit_kwargs(1, learning_starts, parallel=False, overrides=overrides)
    for key in ("replay_buffer_class", "policy_kwargs", "optimize_memory_usage"):
        kw.pop(key)  # SB3's own ReplayBuffer and CnnPolicy (its NatureCNN)
    kw["policy"] = "CnnPolicy"
    # the preset's n-step returns go to the compact buffer's kwargs; SB3 sets them up itself from n_steps
    n_steps = kw.pop("replay_buffer_kwargs", {}).get("n_steps", 1)
    if n_steps > 1:
        kw["n_steps"] = n_steps
    return DQN(env=venv, device=device, seed=0, **kw), venv


def make_kit(
    steps: int,
    learning_starts: int,
    parallel: bool = False,
    policy: str | None = None,
    threads: int | None = None,
    device: str = "cpu",
    overrides: dict | None = None,
):
    from stable_baselines3 import DQN

    kw = _kit_kwargs(steps, learning_starts, parallel, policy, overrides)
    if parallel:
        from retro_atari_kit.integrations.sb3.parallel_play import make_play_env, parallel_play_class

        venv = make_play_env("RetroKit/Pong-v0", n_envs=1, seed=0)
        cls = parallel_play_class(DQN, {"trainer_threads": threads})
        return cls(env=venv, device=device, seed=0, **kw), venv
    from retro_atari_kit.integrations.sb3 import make_vec_env

    venv = make_vec_env("RetroKit/Pong-v0", n_envs=1, seed=0)
    return DQN(env=venv, device=device, seed=0, **kw), venv


def contenders(steps_list: list[int], parallel_list: list[int]) -> dict:
    """name -> factory(learning_starts) -> (model, venv). ``-cnn``: SB3's CnnPolicy; ``-kp``: KitDQNPolicy;
    ``par-steps<k>`` without a suffix is ``pong-dqn-fast`` as shipped (KitDQNPolicy) at train_freq k, with
    the trainer on cores - 1 torch threads; ``-t2``: the trainer on 2 threads."""
    out = {"sb3": make_sb3, "kit": lambda ls: make_kit(1, ls)}
    # the preset with torch's Adam as a loop over the weights instead of the one fused kernel
    out["kit-unfused"] = lambda ls: make_kit(1, ls, overrides={"policy_kwargs.optimizer_kwargs.fused": False})
    for k in steps_list:
        out[f"kit-steps{k}"] = lambda ls, k=k: make_kit(k, ls)
    for k in parallel_list:
        out[f"kit-steps{k}-kp"] = lambda ls, k=k: make_kit(k, ls, policy=KIT_DQN_POLICY)
        out[f"par-steps{k}-cnn"] = lambda ls, k=k: make_kit(k, ls, parallel=True, policy="CnnPolicy")
        out[f"par-steps{k}"] = lambda ls, k=k: make_kit(k, ls, parallel=True)
        out[f"par-steps{k}-t2"] = lambda ls, k=k: make_kit(k, ls, parallel=True, threads=2)
    return out


def measure(make, steps: int, learning_starts: int, threads: int) -> tuple[float, float]:
    """(training steps/s, CPU ms per step of the trainer and the play process together)."""
    import torch

    torch.set_num_threads(threads)  # the parallel path lowers it to cores - 1 for its trainer
    model, venv = make(learning_starts)
    try:
        model.learn(learning_starts)  # random prefill, not timed (the player process starts here too)
        with harness.CpuMeter(pids=[venv.pid] if hasattr(venv, "pid") else []) as meter:
            model.learn(steps, reset_num_timesteps=False)
        return steps / meter.usage.wall, meter.usage.cpu / steps * 1e3
    finally:
        venv.close()


# --------------------------------------------------------------------------------------------------------
# --profile: the parts of a step, each timed on its own
# --------------------------------------------------------------------------------------------------------


def _per_call(fn, n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


def profile(batches: list[int], n: int) -> None:
    import torch
    from retro_atari_kit.integrations.sb3.policies import KitDQNPolicy
    from stable_baselines3 import DQN

    model, venv = make_kit(1, 2000)
    model.learn(2000)  # a replay with real frames
    obs = venv.reset()
    acts = np.zeros(1, dtype=np.int64)
    steps, t0 = [], time.perf_counter()
    for _ in range(n):
        nxt, rew, done, info = venv.step(acts)
        after = np.stack([info[0]["terminal_observation"]]) if done[0] else nxt
        steps.append((obs, after, rew, done, info))
        obs = nxt
    rows = {"env step (kit, 1 env)": (time.perf_counter() - t0) / n * 1e3}
    rows["greedy action, batch 1 (policy.predict)"] = _per_call(
        lambda: model.policy.predict(obs, deterministic=True), n
    )
    rb = model.replay_buffer
    t0 = time.perf_counter()
    for o, nx, r, d, i in steps:
        rb.add(o, nx, acts, r, d, i)
    rows["replay add (compact)"] = (time.perf_counter() - t0) / n * 1e3
    # the same update with KitDQNPolicy (uint8 frames straight to the kit's channels-last extractor)
    kw = _kit_kwargs(1, 2000, parallel=False)
    kw.pop("policy")
    kit = DQN(KitDQNPolicy, venv, device="cpu", seed=0, **kw)
    kit.policy.load_state_dict(model.policy.state_dict())
    kit.replay_buffer = rb
    kit._setup_learn(10_000)  # logger, progress
    contenders = {"CnnPolicy": model, "KitDQNPolicy": kit}
    for threads in (2, 1):
        torch.set_num_threads(threads)
        for b in batches:
            rows[f"replay sample({b})"] = _per_call(lambda b=b: rb.sample(b), n)
            times: dict[str, list[float]] = {k: [] for k in contenders}
            for _ in range(3):  # alternate the two policies
                for name, m in contenders.items():
                    times[name].append(
                        _per_call(lambda m=m, b=b: m.train(gradient_steps=1, batch_size=b), max(5, n // 20))
                    )
            for name, t in times.items():
                rows[f"update, batch {b}, {name}, {threads} thread(s)"] = statistics.median(t)
        rows[f"greedy action, batch 1, {threads} thread(s)"] = _per_call(
            lambda: model.policy.predict(obs, deterministic=True), n
        )
    venv.close()
    print("ms per call (mean over the calls; updates: median of 3 alternating blocks)")
    for name, ms in rows.items():
        print(f"  {name:58s} {ms:8.2f}")


def main(argv: list[str] | None = None) -> None:
    p = harness.parser(__doc__)
    harness.add_common_options(
        p, quick="one round of sb3 and kit, 8 steps after 16 random ones, a 1,000-transition replay"
    )
    p.add_argument("--steps", type=int, default=800, help="timed training steps per measurement")
    p.add_argument("--learning-starts", type=int, default=1000, help="random prefill steps (not timed)")
    p.add_argument("--kit-steps", type=int, nargs="*", default=[2, 4, 6], help="train_freq values (change 1)")
    p.add_argument(
        "--par-steps", type=int, nargs="*", default=[4], help="train_freq values with play process"
    )
    p.add_argument("--only", nargs="*", default=None, help="run only these contenders")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, = cores)")
    p.add_argument("--profile", action="store_true", help="time the parts of a step instead")
    args = p.parse_args(argv)
    if args.profile:
        profile([32, 128], 200)
        return
    import torch

    args.threads = args.threads or torch.get_num_threads()
    table = contenders(args.kit_steps, args.par_steps)
    if args.quick:
        small = {"buffer_size": 1000}
        table = {
            "sb3": lambda ls: make_sb3(ls, overrides=small),
            "kit": lambda ls: make_kit(1, ls, overrides=small),
        }
        args.rounds, args.steps, args.learning_starts = 1, 8, 16
    if args.only:
        table = {k: v for k, v in table.items() if k in args.only}
    cells = {
        name: (lambda make=make: measure(make, args.steps, args.learning_starts, args.threads))
        for name, make in table.items()
    }
    samples = harness.alternate(
        cells, args.rounds, show=lambda name, v: f"{name:15s} {v[0]:7.1f} steps/s, {v[1]:6.1f} CPU ms/step"
    )
    report = harness.Report()
    report.add(
        f"## DQN Pong, 1 env, {args.steps} training steps after {args.learning_starts} random ones, "
        f"median of {samples.rounds} rounds, {args.threads} torch thread(s) (parallel: trainer cores - 1)",
        "",
    )
    rows = [
        [
            k,
            f"{harness.num(samples.median(k, 0))} ({harness.each(samples.of(k, 0))})",
            harness.ratio(samples.median_ratio(k, "sb3", 0)),
            harness.ratio(samples.median_ratio(k, "kit", 0)),
            harness.num(samples.median(k, 1)),
        ]
        for k in table
    ]
    report.table(["contender", "steps/s (median; rounds)", "/ sb3", "/ kit", "CPU ms per step"], rows)
    report.write(args.out)


if __name__ == "__main__":
    main()
