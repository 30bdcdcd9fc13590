"""DQN: training steps/s and replay memory, the kit's stack against plain SB3, side by side in one run.

- ``sb3``: ``make_atari_env("PongNoFrameskip-v4", n_envs=1)`` + ``VecFrameStack(4)`` + ``DQN("CnnPolicy")``
  with SB3's ``ReplayBuffer``.
- ``kit``: ``make_vec_env("RetroKit/Pong-v0", n_envs=1)`` + the kit's Nature CNN + ``get_preset("dqn")``
  (``CompactReplayBuffer``).

Both use the zoo DQN hyperparameters except ``learning_starts`` (``--learning-starts``, so updates happen
within the measured window). Also reported: bytes of the replay arrays for 100k and 1M transitions, and the
time of ``buffer.sample(32)`` on a buffer holding the same real transitions.

Contenders alternate in rounds; medians of ``--rounds`` and of the per-round ratios
(``benchmarks/harness.py``). Run by hand, never in CI::

    python benchmarks/dqn_throughput.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402


def _kwargs(learning_starts: int, buffer_size: int) -> dict:
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs

    overrides = {"learning_starts": learning_starts, "buffer_size": buffer_size}
    preset = apply_overrides(get_preset("dqn"), overrides)
    return to_sb3_kwargs(preset, network="nature")


def make_sb3(learning_starts: int, buffer_size: int):
    import ale_py
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    venv = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=0), n_stack=4)
    kw = _kwargs(learning_starts, buffer_size)
    kw.pop("replay_buffer_class")
    kw.pop("policy_kwargs")
    return DQN(env=venv, device="cpu", seed=0, **kw)


def make_kit(learning_starts: int, buffer_size: int):
    from retro_atari_kit.integrations.sb3 import make_vec_env
    from stable_baselines3 import DQN

    venv = make_vec_env("RetroKit/Pong-v0", n_envs=1, seed=0)
    return DQN(env=venv, device="cpu", seed=0, **_kwargs(learning_starts, buffer_size))


def replay_bytes() -> dict[str, dict[int, int]]:
    import gymnasium as gym
    from retro_atari_kit.integrations.sb3 import CompactReplayBuffer

    import retro_atari_kit  # noqa: F401

    env = gym.make("RetroKit/Pong-v0")
    obs, act = env.observation_space, env.action_space
    env.close()
    per_sb3 = 2 * int(np.prod(obs.shape)) + 8 + 3 * 4  # obs + next_obs + int64 action + reward/done/timeout
    out: dict[str, dict[int, int]] = {
        "sb3 ReplayBuffer": {},
        "sb3 optimize_memory_usage": {},
        "kit CompactReplayBuffer": {},
    }
    for n in (100_000, 1_000_000):
        out["sb3 ReplayBuffer"][n] = n * per_sb3
        out["sb3 optimize_memory_usage"][n] = n * (per_sb3 - int(np.prod(obs.shape)))
        out["kit CompactReplayBuffer"][n] = CompactReplayBuffer.estimate_nbytes(n, obs, act)
    return out


def measure(model, steps: int, warmup: int) -> float:
    model.learn(warmup)
    t0 = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - t0)


def sample_time(model, n: int = 200) -> float:
    rb = model.replay_buffer
    rb.sample(32)
    t0 = time.perf_counter()
    for _ in range(n):
        rb.sample(32)
    return (time.perf_counter() - t0) / n


def _one(make, steps: int, learning_starts: int, buffer_size: int) -> tuple[float, float]:
    """(training steps/s, seconds per ``sample(32)``) of a fresh model."""
    model = make(learning_starts, buffer_size)
    try:
        return measure(model, steps, learning_starts), sample_time(model)
    finally:
        model.get_env().close()


def main(argv: list[str] | None = None) -> None:
    p = harness.parser(__doc__)
    harness.add_common_options(p, quick="one round, 8 steps after 16 random ones, a 1,000-transition replay")
    p.add_argument("--steps", type=int, default=2000, help="measured env steps per round")
    p.add_argument("--learning-starts", type=int, default=1000)
    args = p.parse_args(argv)
    buffer_size = 100_000
    if args.quick:
        args.rounds, args.steps, args.learning_starts, buffer_size = 1, 8, 16, 1000
    report = harness.Report()
    report.add("## Replay arrays, bytes", "")
    sizes = replay_bytes()
    counts = list(next(iter(sizes.values())))
    report.table(
        ["replay", *(f"{n:,d} transitions" for n in counts)],
        [[name, *(f"{b / 1e9:.2f} GB" for b in by_n.values())] for name, by_n in sizes.items()],
    )
    cells = {
        name: (lambda make=make: _one(make, args.steps, args.learning_starts, buffer_size))
        for name, make in (("sb3", make_sb3), ("kit", make_kit))
    }
    samples = harness.alternate(
        cells,
        args.rounds,
        show=lambda name, v: f"{name:4s} {v[0]:7.1f} steps/s, sample(32) {v[1] * 1e3:.2f} ms",
    )
    report.add(
        f"## DQN Pong, 1 env, zoo hyperparameters (learning_starts={args.learning_starts}), median of "
        f"{samples.rounds} rounds",
        "",
    )
    rows = [
        [
            name,
            harness.num(samples.median(name, 0)),
            f"{samples.median(name, 1) * 1e3:.2f}",
            harness.ratio(samples.median_ratio(name, "sb3", 0)),
        ]
        for name in cells
    ]
    report.table(["contender", "steps/s", "sample(32), ms", "/ sb3 (median of per-round ratios)"], rows)
    report.write(args.out)


if __name__ == "__main__":
    main()
