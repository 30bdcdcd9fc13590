"""``retrokit train ALGO ENV_ID``: one command, tuned defaults, a run dir with everything to look at."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys

from retro_atari_kit.cli._common import CliError, engine, user_errors
from retro_atari_kit.cli.arguments import (
    nonneg_steps,
    parse_env_kwargs,
    parse_set,
    parse_timesteps,
    positive_int,
    seed,
)
from retro_atari_kit.runs.spec import (
    ENGINE_OPTION_SPECS,
    ENGINE_OPTIONS,
    Option,
    option_flag_for_setting,
    spec_options,
)

# argparse type of each kind of TrainSpec value (runs.spec.Option.kind); steps, settings and kwargs are
# parsed when the spec is built, for their own one-line messages
ARG_TYPES = {"count": positive_int, "every": nonneg_steps, "seed": seed, "int": int}


def _help(option: Option, default) -> str:
    if option.kind == "switch" or default is None:
        return option.help
    return (
        f"{option.help} (default: {default:_})"
        if isinstance(default, int)
        else f"{option.help} (default: {default})"
    )


def _add_option(parser, dest: str, option: Option, default) -> None:
    """One TrainSpec field (or engine option) as an argument. Whether it was given must stay visible (--resume
    refuses recorded options): the parser's default is None ([] / False); the spec's is applied later."""
    if option.flag is None:
        parser.add_argument(dest, nargs="?", help=option.help)
    elif option.kind == "switch":
        parser.add_argument(option.flag, dest=dest, action="store_true", help=_help(option, default))
    elif option.kind in ("settings", "kwargs"):
        parser.add_argument(
            option.flag, dest=dest, action="append", default=[], metavar=option.metavar, help=option.help
        )
    else:
        parser.add_argument(
            option.flag,
            dest=dest,
            type=ARG_TYPES.get(option.kind),
            choices=option.choices,
            default=None,
            metavar=option.metavar,
            help=_help(option, default),
        )


def _algorithms_help() -> str:
    from retro_atari_kit.presets import ALGORITHMS, engine_presets

    rllib = ", ".join(engine_presets("rllib"))
    return f"{', '.join(ALGORITHMS)} (qrdqn with sb3-contrib); --engine rllib: {rllib}"


def add_parser(sub) -> None:
    algos = _algorithms_help()
    p = sub.add_parser(
        "train",
        help=f"train an agent ({algos}) with the kit's stack",
        description="Train an agent on a RetroKit env. Prints the resolved config and a memory estimate "
        "first; Ctrl-C / SIGTERM saves a checkpoint and exits 0.",
    )
    for dest, (option, default) in spec_options().items():
        if dest == "algo":
            option = dataclasses.replace(option, help=algos)
        _add_option(p, dest, option, default)
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
    for engine_name, options in ENGINE_OPTION_SPECS.items():
        group = p.add_argument_group(f"{engine_name} (--engine {engine_name})")
        for option in options.values():
            _add_option(group, _dest(option.flag), option, None)
    p.set_defaults(func=run)


def _dest(flag: str) -> str:
    """argparse's attribute name for a long flag: ``--envs-per-runner`` -> ``envs_per_runner``."""
    return flag.lstrip("-").replace("-", "_")


# option dest -> flag, for the options --resume refuses: the spec's recorded options, the engine-only
# options (recorded in config.yaml too) and --force
RECORDED_OPTIONS = {
    **{dest: option.flag for dest, (option, _) in spec_options().items() if option.flag and option.recorded},
    **{_dest(flag): flag for options in ENGINE_OPTIONS.values() for flag in options.values()},
    "force": "--force",
}


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


def _spec_values(args: argparse.Namespace) -> dict:
    """The TrainSpec fields from the arguments: given values parsed by their kind, the spec's defaults for the
    others."""
    values = {}
    for dest, (option, default) in spec_options().items():
        value = getattr(args, dest)
        if value is None or (option.kind in ("settings", "kwargs") and not value):
            value = default
        elif option.kind == "steps":
            value = parse_timesteps(value)
        elif option.kind == "settings":
            value = parse_set(value)
            for key in value:
                if option_flag_for_setting(key):
                    flag = option_flag_for_setting(key)
                    raise CliError(f"--set {key}=...: {key} is set by {flag}; use {flag} instead of --set")
        elif option.kind == "kwargs":
            value = parse_env_kwargs(value)
        if option.kind == "lower" and isinstance(value, str):
            value = value.lower()
        values[dest] = value
    return values


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
    """Settings descend once: the arguments -> the run layer's checks (``prepare_resume``,
    ``prepare_new_run``, which call down into the engine's rules) -> the engine's ``train``."""
    from retro_atari_kit.runs import RunError, RunLock, TrainSpec, check_new_run_dir, load_config
    from retro_atari_kit.runs.resume import prepare_resume
    from retro_atari_kit.runs.startup import prepare_new_run

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
            config, run_dir, checkpoint = prepare_resume(args.resume, timesteps=total)
    else:
        if not args.algo or not args.env_id:
            raise CliError(
                "usage: retrokit train ALGO ENV_ID [options], e.g. retrokit train ppo RetroKit/Pong-v0"
            )
        if args.run_dir is not None and not args.run_dir.strip():
            raise CliError("--run-dir '' names no folder; pass one, or leave --run-dir out (the default)")
        spec = TrainSpec(
            **_spec_values(args),
            command=getattr(args, "command_line", ""),
            engine_options=_engine_options(args),
        )
        if spec.run_dir is not None:  # a path the OS refuses is said at once, before seconds of imports
            with user_errors():
                check_new_run_dir(spec.run_dir, args.force)
        backend = engine(spec.engine)  # a missing framework is named before the other checks
        with user_errors():
            config, run_dir = prepare_new_run(spec, args.force)
        checkpoint = None
    try:
        backend.train(config, run_dir, resume_from=checkpoint)
    except RunError as exc:  # e.g. a dead play process, a node without the kit (RLlib): one line, exit 2
        raise CliError(str(exc)) from exc
    print(f"run dir: {os.path.abspath(run_dir)}")
    return 0
