"""PPO training throughput: the kit's stack against plain SB3, side by side in one run.

Contenders (Pong, RL Zoo Atari PPO hyperparameters: 8 envs x 128 steps, 4 epochs, batch 256):

- ``sb3``: plain SB3 as its docs show it: ``make_atari_env("PongNoFrameskip-v4", n_envs=8)`` (DummyVecEnv,
  SB3 ``AtariWrapper``) + ``VecFrameStack(4)`` + ``PPO("CnnPolicy")`` with SB3's ``RolloutBuffer`` and Adam
  (SB3's Nature CNN, or for Impala an IMPALA CNN in the default memory format); only the zoo numbers come
  from the kit's preset.
- ``kit``: ``make_vec_env("RetroKit/Pong-v0", n_envs=8)`` (the kit's fastest backend) + the kit's extractor
  (channels-last) + ``get_preset("ppo")`` (``KitCnnPolicy``, float32).
- ``kit-fast``: the kit's ``FastPPO`` learner (device-resident rollout, GAE on the device; ``make_fast``)
  at the same numbers (``--set fast_learner=true``), no ``torch.compile``.
- ``kit-bf16``: the same as ``kit`` with ``get_preset("ppo", "bf16")`` (the CNN under bf16 autocast; only
  where the CPU has native bf16, otherwise this contender is skipped).

Each measurement is ``model.learn()`` over ``--rollouts`` rollouts after one warm-up rollout, wall time
including env stepping and the PPO updates (and the cores busy meanwhile, env workers included); contenders
alternate in rounds, medians of ``--rounds`` and of the per-round ratios to ``sb3`` are reported
(``benchmarks/harness.py``); ``--quick`` runs every contender once at a tiny rollout.

Run by hand, never in CI::

    python benchmarks/ppo_throughput.py --network nature
    python benchmarks/ppo_throughput.py --network impala --rollouts 1 --warmup 0
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import harness  # noqa: E402

# --quick: every contender at a tiny rollout (checks that the script runs; the figures mean nothing)
QUICK_OVERRIDES = {"n_envs": 2, "n_steps": 4, "batch_size": 8, "n_epochs": 1}


def _plain_kwargs(preset_name: str = "default") -> dict:
    """The preset's hyperparameters as plain SB3 takes them: SB3's ``CnnPolicy`` and ``RolloutBuffer``, its
    default Adam (the kit's policy class, channels-last rollout buffer and fused Adam are the kit's side)."""
    from retro_atari_kit.integrations.sb3.presets import get_preset, to_sb3_kwargs

    kw = to_sb3_kwargs(get_preset("ppo", preset_name))
    for key in ("policy_kwargs", "rollout_buffer_class", "n_envs"):
        kw.pop(key, None)
    kw["policy"] = "CnnPolicy"
    return kw


def _pong_no_frameskip(**kwargs):
    """``PongNoFrameskip-v4``, registering ale-py's IDs first (subprocess workers start without them)."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return gym.make("PongNoFrameskip-v4", **kwargs)


def make_sb3(
    network: str,
    preset_name: str = "default",
    device: str = "cpu",
    vec_env: str = "dummy",
    overrides: dict | None = None,
):
    """Plain SB3 at the hyperparameters (and ``n_envs``) of the kit's PPO preset ``preset_name``:
    ``make_atari_env`` with ``DummyVecEnv`` (``vec_env="dummy"``) or ``SubprocVecEnv`` (``"subproc"``)."""
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack

    n_envs = apply_overrides(get_preset("ppo", preset_name), overrides or {})["n_envs"]
    vec_cls = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}[vec_env]
    venv = VecFrameStack(
        make_atari_env(_pong_no_frameskip, n_envs=n_envs, seed=0, vec_env_cls=vec_cls), n_stack=4
    )
    pk = {}
    if network == "impala":
        from retro_atari_kit.integrations.sb3 import ImpalaCNN

        # linear heads as in SB3's own Nature CnnPolicy (SB3 adds tanh MLP heads for other extractors)
        pk = dict(
            features_extractor_class=ImpalaCNN,
            features_extractor_kwargs=dict(channels_last=False),
            net_arch=[],
        )
    kw = _plain_kwargs(preset_name)
    kw.update({k: v for k, v in (overrides or {}).items() if k != "n_envs"})
    return PPO(env=venv, device=device, seed=0, policy_kwargs=pk, **kw)


def make_kit(network: str, preset_name: str = "default", device: str = "cpu", overrides: dict | None = None):
    """The kit: ``make_vec_env`` (fastest backend) and the PPO preset ``preset_name`` as shipped."""
    from retro_atari_kit.integrations.sb3 import make_vec_env
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs
    from stable_baselines3 import PPO

    preset = apply_overrides(get_preset("ppo", preset_name), overrides or {})
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=preset["n_envs"], seed=0)
    return PPO(env=venv, device=device, seed=0, **to_sb3_kwargs(preset, network=network))


def make_fast(
    network: str,
    preset_name: str = "gpu",
    device: str = "cpu",
    overrides: dict | None = None,
    compile: bool | str | None = None,  # noqa: A002 - FastPPO's word
    cuda_graphs: bool | str | None = None,
):
    """The kit's FastPPO (``fast_learner`` of the preset ``preset_name``) on ``make_vec_env``; ``compile`` and
    ``cuda_graphs`` replace the preset's ``fast_learner`` options when given."""
    from retro_atari_kit.integrations.sb3 import make_vec_env
    from retro_atari_kit.integrations.sb3.algorithms import learner_class
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs

    preset = apply_overrides(get_preset("ppo", preset_name), overrides or {})
    cls, extra = learner_class("ppo", preset.get("fast_learner") or True)
    chosen = {"compile": compile, "cuda_graphs": cuda_graphs}
    extra = {**extra, **{key: value for key, value in chosen.items() if value is not None}}
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=preset["n_envs"], seed=0)
    return cls(env=venv, device=device, seed=0, **extra, **to_sb3_kwargs(preset, network=network))


def measure_cpu(model, rollouts: int, warmup: int) -> tuple[float, float]:
    """(training steps/s, cores busy) of ``model.learn`` over ``rollouts`` rollouts after ``warmup``
    unmeasured ones (first env resets, allocator, thread pools); env workers' CPU included."""
    per_rollout = model.n_steps * model.n_envs
    if warmup:
        model.learn(per_rollout * warmup)
    with harness.CpuMeter() as meter:
        model.learn(per_rollout * rollouts, reset_num_timesteps=False)
    return per_rollout * rollouts / meter.usage.wall, meter.usage.cores_busy


def measure(model, rollouts: int, warmup: int) -> float:
    """Training steps/s (``measure_cpu``'s first figure)."""
    return measure_cpu(model, rollouts, warmup)[0]


def _one(make, network: str, rollouts: int, warmup: int) -> tuple[float, float]:
    model = make(network)
    try:
        return measure_cpu(model, rollouts, warmup)
    finally:
        model.get_env().close()


def main(argv: list[str] | None = None) -> None:
    p = harness.parser(__doc__)
    harness.add_common_options(p, quick=f"one round, one rollout, no warm-up, at {QUICK_OVERRIDES}")
    p.add_argument("--network", choices=["nature", "impala"], default="nature")
    p.add_argument("--rollouts", type=int, default=2, help="measured rollouts (1024 steps each)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured rollouts first")
    args = p.parse_args(argv)
    over = QUICK_OVERRIDES if args.quick else None
    if args.quick:
        args.rounds, args.rollouts, args.warmup = 1, 1, 0
    from retro_atari_kit.integrations.sb3 import native_bf16

    makers = {
        "sb3": lambda network: make_sb3(network, overrides=over),
        "kit": lambda network: make_kit(network, overrides=over),
        "kit-fast": lambda network: make_fast(network, "default", overrides=over),
    }
    if native_bf16("cpu"):
        makers["kit-bf16"] = lambda network: make_kit(network, "bf16", overrides=over)
    cells = {
        name: (lambda make=make: _one(make, args.network, args.rollouts, args.warmup))
        for name, make in makers.items()
    }
    samples = harness.alternate(cells, args.rounds, show=lambda name, v: f"{name:8s} {v[0]:7.1f} steps/s")
    report = harness.Report()
    report.add(
        f"## PPO Pong, {args.network}: training steps/s (median of {samples.rounds} rounds, "
        f"{args.rollouts} rollout(s) after {args.warmup} warm-up; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads)",
        "",
    )
    rows = [
        [
            name,
            harness.num(samples.median(name, 0)),
            harness.each(samples.of(name, 0)),
            harness.ratio(samples.median_ratio(name, "sb3", 0)),
            f"{samples.median(name, 1):.2f}",
        ]
        for name in makers
    ]
    report.table(["contender", "steps/s", "rounds", "/ sb3 (median of per-round ratios)", "cores busy"], rows)
    report.write(args.out)


if __name__ == "__main__":
    main()
