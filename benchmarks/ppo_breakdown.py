"""Where PPO's time goes: rollout collection (policy forward vs env step) and the PPO update, kit vs SB3.

Same contenders as ``ppo_throughput.py`` (Pong, RL Zoo PPO hyperparameters, 8 envs x 128 steps, 4 epochs x
4 minibatches of 256). Both models are built and run one warm-up rollout + update; then they take turns,
one rollout + update each, ``--rollouts`` times (so a slow spell of this shared machine hits both), and the
seconds per 1,024-step rollout are split into

- ``policy``: ``policy.forward`` during collection (batch of 8, no grad),
- ``env``: ``VecEnv.step`` during collection,
- ``collect``: all of ``collect_rollouts`` (policy + env + SB3's rollout-buffer bookkeeping),
- ``train``: ``PPO.train`` (the 16 minibatch updates).

Medians per part are printed, and the kit/SB3 speed ratio as the median of the per-turn ratios.

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


class Instrumented:
    """A PPO model whose collection and update are timed part by part, one rollout at a time."""

    def __init__(self, model) -> None:
        self.model = model
        # env reset, logger, first obs; a budget never reached, so the schedules stay at their start values
        model._setup_learn(model.n_steps * model.n_envs * 10**6)
        self.totals = dict.fromkeys(("policy", "env", "collect", "train"), 0.0)
        # instance attributes shadow the methods, so only this model is instrumented
        model.policy.forward = _timed(model.policy.forward, self.totals, "policy")
        self.venv = model.get_env()
        self.venv.step = _timed(self.venv.step, self.totals, "env")
        self.callback = CallbackList([])
        self.callback.init_callback(model)
        self.per_rollout: list[dict[str, float]] = []

    def rollout(self, record: bool = True) -> None:
        for key in self.totals:
            self.totals[key] = 0.0
        t0 = time.perf_counter()
        self.model.collect_rollouts(self.venv, self.callback, self.model.rollout_buffer, self.model.n_steps)
        self.totals["collect"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.model.train()
        self.totals["train"] = time.perf_counter() - t0
        if record:
            self.per_rollout.append(dict(self.totals))

    def seconds(self, i: int) -> float:
        return self.per_rollout[i]["collect"] + self.per_rollout[i]["train"]

    def medians(self) -> dict[str, float]:
        return {key: statistics.median(r[key] for r in self.per_rollout) for key in self.totals}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollouts", type=int, default=8, help="measured rollouts per contender")
    args = p.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, network nature")
    print(f"seconds per 1,024-step rollout (median of {args.rollouts}, contenders taking turns)")
    runs = {name: Instrumented(make("nature")) for name, make in (("sb3", make_sb3), ("kit", make_kit))}
    for run in runs.values():
        run.rollout(record=False)  # warm-up
    for _ in range(args.rollouts):
        for run in runs.values():
            run.rollout()
    print(f"  {'':4s} {'policy':>7s} {'env':>7s} {'collect':>8s} {'train':>7s} {'total':>7s} {'steps/s':>8s}")
    for name, run in runs.items():
        parts = run.medians()
        total = parts["collect"] + parts["train"]
        steps_per_second = run.model.n_steps * run.model.n_envs / total
        print(
            f"  {name:4s} {parts['policy']:7.3f} {parts['env']:7.3f} {parts['collect']:8.3f} "
            f"{parts['train']:7.3f} {total:7.3f} {steps_per_second:8.1f}",
            flush=True,
        )
        run.venv.close()
    ratios = [runs["sb3"].seconds(i) / runs["kit"].seconds(i) for i in range(args.rollouts)]
    print(
        f"  kit / sb3 = {statistics.median(ratios):.2f}x (median of per-turn ratios; "
        f"range {min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
