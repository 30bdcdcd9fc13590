"""``retrokit train ALGO ENV_ID``: one command, tuned defaults, a run dir with everything to look at."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from retro_atari_kit.cli._common import CliError, user_errors
from retro_atari_kit.cli.arguments import (
    nonneg_steps,
    parse_env_kwargs,
    parse_set,
    parse_timesteps,
    positive_int,
    seed,
)
from retro_atari_kit.cli.engines import ENGINE_MODULES, engine, prepare_new_run
from retro_atari_kit.runs.spec import ENGINE_OPTIONS


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train an agent (ppo, a2c, dqn, qrdqn; RLlib: ppo, appo, impala, dqn) with the kit's stack",
        description="Train an agent on a RetroKit env. Prints the resolved config and a memory estimate "
        "first; Ctrl-C / SIGTERM saves a checkpoint and exits 0.",
    )
    p.add_argument(
        "algo",
        nargs="?",
        help="ppo, a2c, dqn (qrdqn with sb3-contrib); --engine rllib: ppo, appo, impala, dqn",
    )
    p.add_argument("env_id", nargs="?", help="e.g. RetroKit/Pong-v0 (see `retrokit list`)")
    p.add_argument(
        "--engine", default=None, choices=sorted(ENGINE_MODULES), help="training engine (default sb3)"
    )
    p.add_argument("--network", default=None, help="nature (default) or impala")
    p.add_argument(
        "--timesteps",
        default=None,
        help="total agent steps, e.g. 2e6 (default 1e6; with --resume: a new total)",
    )
    p.add_argument("--n-envs", type=positive_int, default=None, help="parallel envs (default: CPU count)")
    p.add_argument("--seed", type=seed, default=None, help="default 0")
    p.add_argument("--device", default=None, help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--preset", default=None, help="hyperparameter preset (default: 'default')")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter, e.g. --set n_steps=256 (repeatable; YAML values)",
    )
    p.add_argument(
        "--env-kwarg",
        dest="env_kwargs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env kwarg, e.g. --env-kwarg crop_score=true (repeatable)",
    )
    p.add_argument(
        "--backend", default=None, help="vector backend: auto (default), native, subprocess or inprocess"
    )
    p.add_argument("--run-dir", default=None, help="default runs/<env>-<algo>-<network>-<seed>-<time>")
    p.add_argument("--eval-every", type=nonneg_steps, default=None, help="evaluate every N steps (0: off)")
    p.add_argument("--eval-episodes", type=positive_int, default=None, help="games per periodic evaluation")
    p.add_argument(
        "--checkpoint-every",
        type=nonneg_steps,
        default=None,
        help="checkpoint every N steps (default 1e5, 0: only at the end / on Ctrl-C)",
    )
    p.add_argument(
        "--save-replay-buffer",
        action="store_true",
        help="DQN/QR-DQN: also save the replay buffer with checkpoints (large)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        default=None,
        help="continue RUN_DIR from its latest checkpoint with its config (only --timesteps may change)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing run dir; train even if the memory estimate exceeds free RAM",
    )
    rllib = p.add_argument_group("RLlib (--engine rllib)")
    flag = ENGINE_OPTIONS["rllib"]  # option name -> flag, the one list
    rllib.add_argument(
        flag["num_env_runners"],
        type=positive_int,
        default=None,
        metavar="N",
        help="env runner processes (default: the cluster's CPUs minus one)",
    )
    rllib.add_argument(
        flag["num_envs_per_env_runner"],
        type=positive_int,
        default=None,
        metavar="K",
        help="envs per runner, one vector env (default: the preset's)",
    )
    rllib.add_argument(
        flag["address"],
        default=None,
        metavar="auto|HOST:PORT",
        help="join a running Ray cluster (default: start a local Ray with this machine's CPUs)",
    )
    rllib.add_argument(flag["num_gpus"], type=int, default=None, metavar="G", help="GPUs for the learner(s)")
    p.set_defaults(func=run)


# The defaults of the options a run's config records (None in the parser, so that --resume can tell what
# was given: a resumed run keeps the settings of its config.yaml).
SPEC_DEFAULTS = {
    "engine": "sb3",
    "network": "nature",
    "seed": 0,
    "device": "auto",
    "preset": "default",
    "backend": "auto",
    "eval_every": 0,
    "eval_episodes": 5,
    "checkpoint_every": 100_000,
}
# option dest -> flag, for the options --resume refuses
RECORDED_OPTIONS = {
    "engine": "--engine",
    "network": "--network",
    "n_envs": "--n-envs",
    "seed": "--seed",
    "device": "--device",
    "preset": "--preset",
    "overrides": "--set",
    "env_kwargs": "--env-kwarg",
    "backend": "--backend",
    "run_dir": "--run-dir",
    "eval_every": "--eval-every",
    "eval_episodes": "--eval-episodes",
    "checkpoint_every": "--checkpoint-every",
    "save_replay_buffer": "--save-replay-buffer",
    "force": "--force",
}


def _dest(flag: str) -> str:
    """argparse's attribute name for a long flag: ``--envs-per-runner`` -> ``envs_per_runner``."""
    return flag.lstrip("-").replace("-", "_")


# the engine-only options (runs.ENGINE_OPTIONS) are recorded in config.yaml too
RECORDED_OPTIONS.update({_dest(f): f for options in ENGINE_OPTIONS.values() for f in options.values()})


def _value(args: argparse.Namespace, dest: str):
    """The option's value, or its default when it was not given."""
    value = getattr(args, dest)
    return SPEC_DEFAULTS[dest] if value is None else value


def _refuse_options_with_resume(args: argparse.Namespace) -> None:
    """CliError naming the options given with ``--resume`` that would change a recorded setting: a resumed
    run continues with its config.yaml, so they would be ignored (only ``--timesteps`` sets a new total)."""
    given = [flag for dest, flag in RECORDED_OPTIONS.items() if getattr(args, dest) not in (None, [], False)]
    if given:
        raise CliError(
            f"--resume continues {args.resume} with the settings in its config.yaml; drop "
            f"{', '.join(given)} (only --timesteps may change; start a new run to change the others)"
        )


def _engine_options(args: argparse.Namespace) -> dict:
    """The engine-only options that were given (``runs.ENGINE_OPTIONS``: option name -> flag), by option
    name; CliError if one is given without its engine."""
    given = {}
    for name, options in ENGINE_OPTIONS.items():
        for key, flag in options.items():
            value = getattr(args, _dest(flag))
            if value is None:
                continue
            if args.engine != name:
                raise CliError(f"{flag} needs --engine {name}")
            given[key] = value
    return given


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.runs import StopRequested, stop_signals

    # From here on SIGINT / SIGTERM only request a stop (retro_atari_kit.runs.stop): before the run dir
    # exists nothing is written, before training starts a new run dir is removed, after that the run saves
    # a checkpoint; no signal leaves a dir that is neither a fresh start nor resumable.
    try:
        with stop_signals(), contextlib.ExitStack() as held:
            return _run(args, held)
    except StopRequested as exc:
        print(f"retrokit: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(args: argparse.Namespace, held: contextlib.ExitStack) -> int:
    from retro_atari_kit.runs import RunError, RunLock, TrainSpec, load_config

    if args.resume:
        if args.algo or args.env_id:
            raise CliError("--resume takes the algo and env from the run's config.yaml; drop ALGO ENV_ID")
        _refuse_options_with_resume(args)
        total = parse_timesteps(args.timesteps) if args.timesteps is not None else None
        with user_errors():
            name = load_config(args.resume)["engine"] if os.path.isdir(args.resume) else "sb3"
            if os.path.isdir(args.resume):  # a kit run: lock it before anything of it is read or written,
                held.enter_context(RunLock(args.resume))  # so of two resumes exactly one goes on
        backend = engine(name)
        with user_errors():
            config, run_dir, checkpoint = backend.prepare_resume(args.resume, timesteps=total)
    else:
        if not args.algo or not args.env_id:
            raise CliError(
                "usage: retrokit train ALGO ENV_ID [options], e.g. retrokit train ppo RetroKit/Pong-v0"
            )
        if args.run_dir is not None and not args.run_dir.strip():
            raise CliError("--run-dir '' names no folder; pass one, or leave --run-dir out (the default)")
        spec = TrainSpec(
            algo=args.algo.lower(),
            env_id=args.env_id,
            engine=_value(args, "engine"),
            network=_value(args, "network").lower(),
            timesteps=parse_timesteps("1e6" if args.timesteps is None else args.timesteps),
            n_envs=args.n_envs,
            seed=_value(args, "seed"),
            device=_value(args, "device"),
            preset=_value(args, "preset"),
            overrides=parse_set(args.overrides),
            env_kwargs=parse_env_kwargs(args.env_kwargs),
            run_dir=args.run_dir,
            eval_every=_value(args, "eval_every"),
            eval_episodes=_value(args, "eval_episodes"),
            checkpoint_every=_value(args, "checkpoint_every"),
            save_replay_buffer=args.save_replay_buffer,
            backend=_value(args, "backend"),
            command=getattr(args, "command_line", ""),
            engine_options=_engine_options(args),
        )
        backend, config, run_dir = prepare_new_run(spec, args.force)
        checkpoint = None
    try:
        backend.train(config, run_dir, resume_from=checkpoint)
    except RunError as exc:  # e.g. a dead play process, a node without the kit (RLlib): one line, exit 2
        raise CliError(str(exc)) from exc
    print(f"run dir: {os.path.abspath(run_dir)}")
    return 0
