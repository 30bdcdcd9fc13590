"""Vectorised env throughput: retro-atari-kit backends against their peers, side by side in one run.

Atari: Pong, DeepMind-style stack (84x84 gray, frame stack 4, frame skip 4), random actions, N envs:

- kit ``gym.make_vec("RetroKit/Pong-v0")`` with ``backend="auto"`` (native) and ``backend="subprocess"``,
  and the native backend in one process with ``cv2.resize`` instead of the kit's exact resize kernel
- SB3 ``make_atari_env`` + ``SubprocVecEnv`` + ``VecFrameStack(4)``; SB3 ``DummyVecEnv`` + ``VecFrameStack``
- gymnasium ``AsyncVectorEnv`` over ``AtariPreprocessing`` + ``FrameStackObservation(4)``
- raw ale-py ``AtariVectorEnv`` (its own preprocessing, no kit semantics)
- EnvPool ``Pong-v5`` (if installed)

Retro: ``RetroKit/Pong-Atari2600-v0`` (2 and 4 envs) against SB3 ``SubprocVecEnv`` + ``VecFrameStack`` over a
plain stable-retro stack (discrete actions, 4-frame skip with 0.25 sticky first frame, SB3 ``WarpFrame``,
``ClipRewardEnv``).

Run by hand, never in CI::

    python benchmarks/vec_throughput.py             # full table
    python benchmarks/vec_throughput.py --quick     # one round, fewer steps, N in {1, 4}
    python benchmarks/vec_throughput.py --sizes 4 8 --only kit raw EnvPool --skip-retro

Prints env steps per second (N envs x vector steps / wall seconds; the median of ``--rounds``, the
contenders alternated in each round, ``benchmarks/harness.py``) and ratios against SB3 SubprocVecEnv and
raw AtariVectorEnv (medians of the per-round ratios); ``--out`` also writes the tables to a file.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402


class _Runner:
    """Uniform reset/step/close over gymnasium VectorEnvs, SB3 VecEnvs and EnvPool."""

    def __init__(self, env, kind: str, n_actions: int):
        self.env, self.kind, self.n_actions = env, kind, n_actions

    def reset(self) -> None:
        if self.kind == "sb3":
            self.env.reset()
        else:
            self.env.reset(seed=0)

    def step(self, actions: np.ndarray) -> None:
        self.env.step(actions)

    def close(self) -> None:
        self.env.close()


# -- Atari contenders ----------------------------------------------------------------------------------
def kit(backend: str, env_id: str = "RetroKit/Pong-v0", **vector_kwargs: Any) -> Callable[[int], _Runner]:
    def make(n: int) -> _Runner:
        import retro_atari_kit  # noqa: F401

        venv = gym.make_vec(env_id, num_envs=n, backend=backend, **vector_kwargs)
        return _Runner(venv, "gym", venv.single_action_space.n)

    return make


def kit_cv2_resize(n: int) -> _Runner:
    """The native backend in this process with OpenCV's own resize instead of the kit's exact kernel (in
    this process: worker processes would load the kernel themselves)."""
    from retro_atari_kit.wrappers.area_resize import unload_kernel

    runner = kit("native", shards=1)(n)
    unload_kernel()  # the next kit env loads it again (numba's cache, outside the timed loop)
    return runner


def _pong_no_frameskip(**kwargs) -> gym.Env:
    """``PongNoFrameskip-v4``, registering ale-py's IDs first (subprocess workers start without them)."""
    import ale_py

    gym.register_envs(ale_py)
    return gym.make("PongNoFrameskip-v4", **kwargs)


def sb3_atari(vec_cls_name: str) -> Callable[[int], _Runner]:
    def make(n: int) -> _Runner:
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack

        vec_cls = {"subproc": SubprocVecEnv, "dummy": DummyVecEnv}[vec_cls_name]
        venv = VecFrameStack(make_atari_env(_pong_no_frameskip, n_envs=n, seed=0, vec_env_cls=vec_cls), 4)
        return _Runner(venv, "sb3", venv.action_space.n)

    return make


def _gym_atari_env() -> gym.Env:
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=True, grayscale_obs=True
    )
    return gym.wrappers.FrameStackObservation(env, 4)


def gym_async(n: int) -> _Runner:
    venv = gym.vector.AsyncVectorEnv([_gym_atari_env for _ in range(n)])
    return _Runner(venv, "gym", venv.single_action_space.n)


def raw_ale(n: int) -> _Runner:
    from ale_py.vector_env import AtariVectorEnv

    venv = AtariVectorEnv("pong", n)
    return _Runner(venv, "gym", venv.single_action_space.n)


def envpool_pong(n: int) -> _Runner:
    import envpool

    venv = envpool.make_gymnasium("Pong-v5", num_envs=n, batch_size=n)
    return _Runner(venv, "gym", venv.action_space.n)


class AsyncRunner:
    """An EnvPool-style async env (``async_reset`` / ``recv`` / ``send``, batches of ``N // 2``) behind the
    calls the measurements make: each ``step`` takes two batches, so N env steps as a synchronous step, and
    the actions of one batch are sent while the other batch emulates."""

    def __init__(self, env):
        self.env = env
        # EnvPool's action_space is one env's
        self.single_action_space = getattr(env, "single_action_space", None) or env.action_space
        self.n_actions = self.single_action_space.n

    def reset(self, seed: int = 0) -> None:
        try:
            self.env.async_reset(seed=seed)
        except TypeError:  # EnvPool takes its seed at creation
            self.env.async_reset()

    def step(self, actions: np.ndarray) -> None:
        for _ in range(2):
            *_, info = self.env.recv()
            ids = info["env_id"]
            self.env.send(actions[ids], ids)

    def close(self) -> None:
        self.env.close()


def envpool_async(n: int) -> AsyncRunner:
    """EnvPool's own async API, batches of N // 2."""
    import envpool

    return AsyncRunner(envpool.make_gymnasium("Pong-v5", num_envs=n, batch_size=max(1, n // 2), seed=0))


# -- retro contenders ----------------------------------------------------------------------------------
class _StickyFrameSkip(gym.Wrapper):
    """Repeat each action 4 times; on the first frame keep the previous action with probability 0.25."""

    def __init__(self, env: gym.Env, skip: int = 4, sticky: float = 0.25):
        super().__init__(env)
        self.skip, self.sticky = skip, sticky
        self.prev = None
        self.rng = np.random.default_rng(0)

    def reset(self, **kwargs):
        self.prev = None
        return self.env.reset(**kwargs)

    def step(self, action):
        total = 0.0
        for i in range(self.skip):
            taken = action
            if i == 0 and self.prev is not None and self.rng.random() < self.sticky:
                taken = self.prev
            obs, reward, terminated, truncated, info = self.env.step(taken)
            total += float(reward)
            if terminated or truncated:
                break
        self.prev = action
        return obs, total, terminated, truncated, info


def _plain_retro_env() -> gym.Env:
    import stable_retro
    from stable_baselines3.common.atari_wrappers import ClipRewardEnv, WarpFrame

    from retro_atari_kit.roms import ensure_rom

    ensure_rom("Pong-Atari2600")  # setup only: installs ale-py's ROM into stable-retro's data folder once
    env = stable_retro.make(
        "Pong-Atari2600-v0", render_mode=None, use_restricted_actions=stable_retro.Actions.DISCRETE
    )
    return ClipRewardEnv(WarpFrame(_StickyFrameSkip(env)))


def sb3_retro(n: int) -> _Runner:
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

    venv = VecFrameStack(SubprocVecEnv([_plain_retro_env for _ in range(n)]), 4)
    return _Runner(venv, "sb3", venv.action_space.n)


# -- measurement ---------------------------------------------------------------------------------------
def measure(factory: Callable[[int], _Runner], n: int, steps: int, warmup: int = 50) -> float:
    """Env steps/s of ``steps`` vector steps with random actions after ``warmup`` untimed ones."""
    runner = factory(n)
    try:
        actions = np.random.default_rng(0).integers(0, runner.n_actions, size=(steps + warmup, n))
        runner.reset()
        for t in range(warmup):
            runner.step(actions[t])
        start = time.perf_counter()
        for t in range(warmup, warmup + steps):
            runner.step(actions[t])
        return n * steps / (time.perf_counter() - start)
    finally:
        runner.close()


ATARI_RATIOS = (
    ("kit auto (native)", "SB3 SubprocVecEnv+VecFrameStack"),
    ("kit auto (native)", "ale-py AtariVectorEnv (raw)"),
    ("kit auto (native)", "EnvPool"),
    ("kit auto (native)", "kit native, cv2.resize"),
    ("kit subprocess", "SB3 SubprocVecEnv+VecFrameStack"),
)
RETRO_KIT, RETRO_SB3 = "kit RetroKit/Pong-Atari2600-v0", "SB3 SubprocVecEnv+VecFrameStack (plain retro)"


def _section(
    report: harness.Report,
    contenders: dict[str, Callable[[int], _Runner]],
    sizes: list[int],
    steps_of: Callable[[int], int],
    rounds: int,
    ratios: tuple[tuple[str, str], ...],
) -> None:
    """One table of env steps/s (medians of ``rounds``, the contenders alternated at each N) and one of
    the ``ratios`` (medians of the per-round ratios)."""
    samples = harness.Samples()  # rounds are numbered on across the sizes: each N has its own
    for n in sizes:
        cells = {(name, n): (lambda f=f, n=n: measure(f, n, steps_of(n))) for name, f in contenders.items()}
        harness.alternate(
            cells, rounds, samples=samples, show=lambda key, sps: f"N={key[1]} {key[0]}: {sps:,.0f}"
        )
    rows = [[name, *(harness.num(samples.median((name, n))) for n in sizes)] for name in contenders]
    report.table(["contender", *(f"N={n}" for n in sizes)], rows)
    rows = [
        [f"{a} / {b}", *(harness.ratio(samples.median_ratio((a, n), (b, n))) for n in sizes)]
        for a, b in ratios
        if a in contenders and b in contenders
    ]
    if rows:
        report.table(["ratio (median of per-round ratios)", *(f"N={n}" for n in sizes)], rows)


def main(argv: list[str] | None = None) -> None:
    p = harness.parser(__doc__)
    harness.add_common_options(p, quick="one round, at most 2,000 env steps per measurement, N in {1, 4}")
    p.add_argument("--env-steps", type=int, default=8000, help="env steps per measurement (all N envs)")
    p.add_argument("--skip-retro", action="store_true")
    p.add_argument("--sizes", type=int, nargs="+", help="numbers of envs (default 1 2 4 8)")
    p.add_argument(
        "--only", nargs="+", help="Atari contenders whose name contains one of these words (case-insensitive)"
    )
    args = p.parse_args(argv)
    sizes = args.sizes or ([1, 4] if args.quick else [1, 2, 4, 8])
    env_steps = min(args.env_steps, 2000) if args.quick else args.env_steps
    if args.quick:
        args.rounds = 1

    atari: dict[str, Callable[[int], _Runner]] = {
        "kit auto (native)": kit("auto"),
        "kit native, cv2.resize": kit_cv2_resize,
        "kit subprocess": kit("subprocess"),
        "SB3 SubprocVecEnv+VecFrameStack": sb3_atari("subproc"),
        "SB3 DummyVecEnv+VecFrameStack": sb3_atari("dummy"),
        "gymnasium AsyncVectorEnv": gym_async,
        "ale-py AtariVectorEnv (raw)": raw_ale,
    }
    try:
        import envpool  # noqa: F401

        atari["EnvPool"] = envpool_pong
    except ImportError:
        print("EnvPool not installed: skipped (pip install envpool)")
    if args.only:
        words = [w.lower() for w in args.only]
        atari = {name: f for name, f in atari.items() if any(w in name.lower() for w in words)}

    report = harness.Report()
    report.add(
        f"## Pong, random actions, env steps/s ({env_steps} env steps per measurement, median of "
        f"{args.rounds} rounds; load average {harness.load_average()})",
        "",
    )
    _section(report, atari, sizes, lambda n: max(env_steps // n, 100), args.rounds, ATARI_RATIOS)
    if not args.skip_retro:
        report.add("## Retro Pong-Atari2600, random actions, env steps/s", "")
        retro: dict[str, Callable[[int], _Runner]] = {
            RETRO_KIT: kit("auto", "RetroKit/Pong-Atari2600-v0"),
            RETRO_SB3: sb3_retro,
        }
        retro_sizes = [2] if args.quick else [2, 4]
        _section(
            report,
            retro,
            retro_sizes,
            lambda n: max(env_steps // (2 * n), 100),
            args.rounds,
            ((RETRO_KIT, RETRO_SB3),),
        )
    report.write(args.out)


if __name__ == "__main__":
    main()
