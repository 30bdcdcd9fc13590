"""Where PPO's time goes: rollout collection (policy forward vs env step) and the PPO update, kit vs SB3.

Same contenders as ``ppo_throughput.py`` (Pong, RL Zoo PPO hyperparameters, 8 envs x 128 steps, 4 epochs x
4 minibatches of 256). Each contender runs one warm-up rollout + update, then ``--rollouts`` measured
rollouts, each followed by its update; the seconds per 1,024-step rollout are split into

- ``policy``: ``policy.forward`` during collection (batch of 8, no grad),
- ``env``: ``VecEnv.step`` during collection,
- ``collect``: all of ``collect_rollouts`` (policy + env + SB3's rollout-buffer bookkeeping),
- ``train``: ``PPO.train`` (the 16 minibatch updates).

Run by hand, never in CI::

    python benchmarks/ppo_breakdown.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from ppo_throughput import make_kit, make_sb3
from stable_baselines3.common.callbacks import CallbackList


def _timed(fn: Callable[..., Any], totals: dict[str, float], key: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - t0

    return wrapper


def breakdown(model, rollouts: int) -> dict[str, float]:
    """Median seconds per rollout for each part."""
    model._setup_learn(model.n_steps * model.n_envs * (rollouts + 1))  # env reset, logger, first obs
    totals = dict.fromkeys(("policy", "env", "collect", "train"), 0.0)
    # instance attributes shadow the methods, so only this model is instrumented
    model.policy.forward = _timed(model.policy.forward, totals, "policy")
    venv = model.get_env()
    venv.step = _timed(venv.step, totals, "env")
    callback = CallbackList([])
    callback.init_callback(model)
    per_rollout: list[dict[str, float]] = []
    for i in range(rollouts + 1):
        for key in totals:
            totals[key] = 0.0
        t0 = time.perf_counter()
        model.collect_rollouts(venv, callback, model.rollout_buffer, model.n_steps)
        totals["collect"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.train()
        totals["train"] = time.perf_counter() - t0
        if i:  # the first rollout + update is the warm-up
            per_rollout.append(dict(totals))
    return {key: statistics.median(r[key] for r in per_rollout) for key in totals}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollouts", type=int, default=4, help="measured rollouts per contender")
    args = p.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, network nature")
    print(f"seconds per 1,024-step rollout (median of {args.rollouts})")
    print(f"  {'':4s} {'policy':>7s} {'env':>7s} {'collect':>8s} {'train':>7s} {'total':>7s} {'steps/s':>8s}")
    for name, make in (("sb3", make_sb3), ("kit", make_kit)):
        model = make("nature")
        parts = breakdown(model, args.rollouts)
        model.get_env().close()
        total = parts["collect"] + parts["train"]
        steps_per_second = model.n_steps * model.n_envs / total
        print(f"  {name:4s} {parts['policy']:7.3f} {parts['env']:7.3f} {parts['collect']:8.3f} "
              f"{parts['train']:7.3f} {total:7.3f} {steps_per_second:8.1f}", flush=True)


if __name__ == "__main__":
    main()
