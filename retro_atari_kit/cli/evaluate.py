"""``retrokit eval RUN_DIR|MODEL.zip``: true game scores (whole games, unclipped)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from typing import Any

from retro_atari_kit.cli._common import CliError, add_play_options, user_errors
from retro_atari_kit.cli.arguments import parse_env_kwargs, positive_int, seed
from retro_atari_kit.cli.engines import engine


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="true game scores of a trained agent",
        description="Play whole games (life losses do not end them, rewards unclipped) and "
        "print mean, std, min and max of the true score.",
    )
    p.add_argument(
        "target",
        metavar="RUN_DIR|MODEL.zip",
        help="a run dir (its final model, else its newest checkpoint) or an SB3 model file",
    )
    p.add_argument(
        "--episodes", type=positive_int, default=10, help="whole games to play (default: %(default)s)"
    )
    add_play_options(p)
    p.add_argument(
        "--env-kwarg",
        dest="env_kwargs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env kwarg over the run's, repeatable, e.g. sticky_actions=0.25 (default: the run's env_kwargs)",
    )
    p.add_argument(
        "--seed", type=seed, default=12345, help="seed of the first game's env (default: %(default)s)"
    )
    p.add_argument(
        "--device", default="auto", help="torch device: auto, cpu, cuda, cuda:N (default: %(default)s)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON line on stdout (default: off, a line of text)",
    )
    p.set_defaults(func=run)


def resolve_target(
    target: str, env: str | None, env_kwargs: dict, allow_pickle: bool = False
) -> tuple[str, str, dict, dict | None]:
    """(model path, env id, env kwargs, run config or None). A model file from outside a kit run dir is
    refused (loading it would unpickle its values) unless ``allow_pickle``, where a warning says so.

    A run dir stands for its final model (or newest checkpoint); an unreadable one is an error naming the
    newest readable checkpoint, never a silent fallback to an older model.
    """
    from retro_atari_kit.runs import find_run_dir, load_config

    if os.path.isdir(target):
        config = load_config(target)
        path, _ = engine(config["engine"]).latest_model(target)
        return path, env or config["env_id"], {**config.get("env_kwargs", {}), **env_kwargs}, config
    if not os.path.exists(target):
        raise CliError(f"{target}: no such run dir or model file")
    run = find_run_dir(target)
    if run is not None:
        config = load_config(run)
        return target, env or config["env_id"], {**config.get("env_kwargs", {}), **env_kwargs}, config
    # the mistakes that need no loading first, so that they are the only line (no warning before them)
    if env is None:
        raise CliError(f"{target} has no run config; pass --env ENV_ID (e.g. --env RetroKit/Pong-v0)")
    check_sb3_zip(target)
    if not allow_pickle:
        from retro_atari_kit.runs.untrusted import read_json_member, refuse_pickled

        raise CliError(str(refuse_pickled(target, read_json_member(target))))
    print(
        f"retrokit: warning: {target} is not inside a run dir made by retrokit; SB3 model files can carry "
        "pickled code - loading it as --allow-pickle asks",
        file=sys.stderr,
    )
    return target, env, env_kwargs, None


def check_sb3_zip(path: str) -> None:
    """CliError unless ``path`` looks like an SB3 model file: a zip whose ``data`` member is JSON (SB3's
    layout). Reads no pickle: this runs before the warning about pickled code and before any load."""
    from retro_atari_kit.runs.untrusted import UntrustedFileError, read_json_member

    try:
        read_json_member(path)  # sizes checked before inflating
    except UntrustedFileError as exc:
        raise CliError(str(exc)) from None
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        why = "no 'data' member" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise CliError(f"{path} is not an SB3 model file ({why}); pass a model.zip written by SB3") from None


def load_target(
    target: str, env: str | None, env_kwargs: dict, device: str, allow_pickle: bool = False
) -> tuple[Any, str, str, dict]:
    """Resolve ``target``, load its model with the engine that trained it: (model, path, env id, kwargs)."""
    from retro_atari_kit.evaluation import check_model_fits
    from retro_atari_kit.registration import probe_env
    from retro_atari_kit.runs.startup import check_device

    with user_errors():
        check_device(device)  # a bad --device is named as such, not as an unreadable model file
        path, env_id, kwargs, config = resolve_target(target, env, env_kwargs, allow_pickle)
        obs_space, action_space = probe_env(env_id, kwargs)
        backend = engine(config["engine"] if config else "sb3")
        if config is None:  # only with --allow-pickle: the SB3 file of someone the user trusts
            model = backend.load_model(path, device=device, algo=None, allow_pickle=True)
        else:
            model = backend.load_model(path, device=device, algo=config["algo"])
        check_model_fits(model, env_id, obs_space, action_space)
    return model, path, env_id, kwargs


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.evaluation import evaluate_model, summarize

    model, path, env_id, env_kwargs = load_target(
        args.target, args.env, parse_env_kwargs(args.env_kwargs), args.device, args.allow_pickle
    )
    steps = getattr(model, "num_timesteps", None)
    print(
        f"evaluating {path} ({steps} steps) on {env_id}: {args.episodes} games, "
        f"{'deterministic' if args.deterministic else 'stochastic'} actions",
        file=sys.stderr,
    )

    def game_ended(k: int, score: float, steps: int) -> None:
        # on stderr as each game ends (a long evaluation is never silent); stdout keeps the one result
        print(f"game {k}/{args.episodes}: {score:g} ({steps} steps)", file=sys.stderr, flush=True)

    scores = evaluate_model(
        model,
        env_id,
        env_kwargs,
        episodes=args.episodes,
        seed=args.seed,
        deterministic=args.deterministic,
        on_game=game_ended,
    )
    s = summarize(scores)
    if args.json:
        print(json.dumps({"model": path, "env_id": env_id, "steps": steps, **s, "scores": scores}))
    else:
        print(
            f"true score over {s['episodes']} games: mean {s['mean']:.2f}  std {s['std']:.2f}  "
            f"min {s['min']:.1f}  max {s['max']:.1f}"
        )
    return 0
