"""DQN on Pong, the reference's speed-up table (issue 18): training steps/s after learning starts.

Contenders (all with the reference's hyperparameters: Adam 1e-4, gamma 0.99, target sync every 1k steps,
100k replay, 32 samples per env step, one env; only ``learning_starts`` is lowered so that the measured
window is all training):

- ``sb3``: plain SB3, ``make_atari_env("PongNoFrameskip-v4")`` + ``VecFrameStack(4)`` + ``DQN("CnnPolicy")``
  with SB3's ``ReplayBuffer``, one env step + one batch of 32 per iteration;
- ``kit``: the kit's synchronous ``pong-dqn`` preset (``make_vec_env``, Nature CNN, ``CompactReplayBuffer``);
- ``kit-steps<k>``: the same with ``train_freq=k`` and ``batch_size=32k`` (change 1; same samples per step);
- ``par-steps<k>``: ``kit-steps<k>`` with env play in its own process (change 2; ``pong-dqn-fast`` is k=4).

Each repeat builds every contender afresh, fills ``--learning-starts`` random steps (not timed), then times
``--steps`` training steps; contenders take turns within a repeat, so slow spells hit all of them.

``--profile`` instead times the parts of one step on their own (env step, action, replay add / sample, one
update per batch size), the numbers behind the "where the time goes" table of docs/performance.md.

Run by hand, never in CI::

    python benchmarks/dqn_fast_throughput.py --repeats 3
    python benchmarks/dqn_fast_throughput.py --profile
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

BASE_BATCH = 32


def _kit_kwargs(steps: int, learning_starts: int, parallel: bool) -> dict:
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs

    over = {"learning_starts": learning_starts, "train_freq": steps, "batch_size": BASE_BATCH * steps}
    preset = apply_overrides(get_preset("dqn", "pong-dqn-fast" if parallel else "pong-dqn"), over)
    return to_sb3_kwargs(preset, network="nature")


def make_sb3(learning_starts: int):
    import ale_py
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    venv = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=0), n_stack=4)
    kw = _kit_kwargs(1, learning_starts, parallel=False)
    for key in ("replay_buffer_class", "policy_kwargs", "optimize_memory_usage"):
        kw.pop(key)  # SB3's own ReplayBuffer and CnnPolicy (its NatureCNN)
    return DQN(env=venv, device="cpu", seed=0, **kw), venv


def make_kit(steps: int, learning_starts: int, parallel: bool = False):
    from stable_baselines3 import DQN

    kw = _kit_kwargs(steps, learning_starts, parallel)
    if parallel:
        from retro_atari_kit.integrations.sb3.parallel_play import make_play_env, parallel_play_class

        venv = make_play_env("RetroKit/Pong-v0", n_envs=1, seed=0)
        return parallel_play_class(DQN)(env=venv, device="cpu", seed=0, **kw), venv
    from retro_atari_kit.integrations.sb3 import make_vec_env

    venv = make_vec_env("RetroKit/Pong-v0", n_envs=1, seed=0)
    return DQN(env=venv, device="cpu", seed=0, **kw), venv


def contenders(steps_list: list[int], parallel_list: list[int]) -> dict:
    out = {"sb3": make_sb3, "kit": lambda ls: make_kit(1, ls)}
    for k in steps_list:
        out[f"kit-steps{k}"] = lambda ls, k=k: make_kit(k, ls)
    for k in parallel_list:
        out[f"par-steps{k}"] = lambda ls, k=k: make_kit(k, ls, parallel=True)
    return out


def measure(make, steps: int, learning_starts: int, threads: int) -> float:
    import torch

    torch.set_num_threads(threads)  # the parallel path lowers it to cores - 1 for its trainer
    model, venv = make(learning_starts)
    try:
        model.learn(learning_starts)  # random prefill, not timed (the player process starts here too)
        t0 = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        return steps / (time.perf_counter() - t0)
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

    model, venv = make_kit(1, 2000)
    model.learn(2000)  # a replay with real frames
    obs = venv.reset()
    acts = np.zeros(1, dtype=np.int64)
    rows = {
        "env step (kit, 1 env)": _per_call(lambda: venv.step(acts), n),
        "greedy action, batch 1 (policy.predict)": _per_call(
            lambda: model.policy.predict(obs, deterministic=True), n
        ),
    }
    rb = model.replay_buffer
    nxt, _, done, info = venv.step(acts)
    rows["replay add (compact)"] = _per_call(
        lambda: rb.add(obs, nxt, acts, np.zeros(1), np.zeros(1), [{}]), n
    )
    for b in batches:
        rows[f"replay sample({b})"] = _per_call(lambda b=b: rb.sample(b), n)
        rows[f"update, batch {b} (sample + forward + backward + Adam)"] = _per_call(
            lambda b=b: model.train(gradient_steps=1, batch_size=b), max(5, n // 10)
        )
    torch.set_num_threads(1)
    for b in batches:
        rows[f"update, batch {b}, 1 torch thread"] = _per_call(
            lambda b=b: model.train(gradient_steps=1, batch_size=b), max(5, n // 10)
        )
    rows["greedy action, batch 1, 1 torch thread"] = _per_call(
        lambda: model.policy.predict(obs, deterministic=True), n
    )
    venv.close()
    print("ms per call (median-free mean over the calls; one process, nothing else of the benchmark running)")
    for name, ms in rows.items():
        print(f"  {name:58s} {ms:8.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=800, help="timed training steps per measurement")
    p.add_argument("--learning-starts", type=int, default=1000, help="random prefill steps (not timed)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kit-steps", type=int, nargs="*", default=[2, 4, 6], help="train_freq values (change 1)")
    p.add_argument(
        "--par-steps", type=int, nargs="*", default=[1, 4], help="train_freq values with play process"
    )
    p.add_argument("--only", nargs="*", default=None, help="run only these contenders")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, = cores)")
    p.add_argument("--profile", action="store_true", help="time the parts of a step instead")
    args = p.parse_args()
    if args.profile:
        profile([32, 128], 200)
        return
    import torch

    args.threads = args.threads or torch.get_num_threads()
    table = contenders(args.kit_steps, args.par_steps)
    if args.only:
        table = {k: v for k, v in table.items() if k in args.only}
    results: dict[str, list[float]] = {k: [] for k in table}
    for r in range(args.repeats):
        for name, make in table.items():
            sps = measure(make, args.steps, args.learning_starts, args.threads)
            results[name].append(sps)
            print(f"  repeat {r}: {name:11s} {sps:7.1f} steps/s", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(
        f"\nDQN Pong, 1 env, {args.steps} training steps after {args.learning_starts} random ones, "
        f"median of {args.repeats}, {args.threads} torch thread(s) (parallel: trainer cores - 1)"
    )
    print("| contender | steps/s (median; repeats) | / sb3 | / kit |")
    print("|---|---|---|---|")
    for k, v in results.items():
        reps = ", ".join(f"{x:.1f}" for x in v)
        sb3 = f"{med[k] / med['sb3']:.2f}x" if "sb3" in med else "-"
        kit = f"{med[k] / med['kit']:.2f}x" if "kit" in med else "-"
        print(f"| {k} | {med[k]:.1f} ({reps}) | {sb3} | {kit} |")


if __name__ == "__main__":
    main()
