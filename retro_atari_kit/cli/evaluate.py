"""``retrokit eval RUN_DIR|MODEL.zip``: true game scores (whole games, unclipped)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from typing import Any

from retro_atari_kit.cli._common import CliError, add_play_options, engine, user_errors
from retro_atari_kit.cli.arguments import parse_env_kwargs, positive_int, seed
from retro_atari_kit.cli.targets import check_targets_exist
from retro_atari_kit.protocols import PROTOCOLS


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="true game scores of trained agents, under an evaluation protocol",
        description="Play whole games (life losses do not end them, rewards unclipped) and "
        "print mean, std, min and max of the true score. Several run dirs / models are evaluated in one "
        "command (--jobs of them at once); with --out DIR each one's scores are written with the protocol's "
        "settings to an eval record that `retrokit report` reads.",
    )
    p.add_argument(
        "targets",
        nargs="+",
        metavar="RUN_DIR|MODEL.zip",
        help="run dirs (their final model, else their newest checkpoint) or SB3 model files",
    )
    p.add_argument(
        "--episodes", type=positive_int, default=10, help="whole games to play (default: %(default)s)"
    )
    p.add_argument(
        "--protocol",
        choices=list(PROTOCOLS),
        default=None,
        help="training: the kit's default (DeepMind) stack with the run's env kwargs; machado: sticky "
        "actions 0.25, full action set, no life-loss ends, no no-ops, 108k-frame cap; nature: up to 30 "
        "no-ops, 18k-frame (5 min) cap, epsilon 0.05 for DQN/QR-DQN (default: the protocol the run "
        "trained under, `retrokit train --protocol`; training for a model file outside a run; "
        "docs/evaluation.md)",
    )
    add_play_options(p)
    p.add_argument(
        "--env-kwarg",
        dest="env_kwargs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env kwarg over the run's, repeatable, e.g. sticky_actions=0.25 (default: the run's "
        "env_kwargs); the protocol's settings override it",
    )
    p.add_argument(
        "--seed",
        type=seed,
        default=12345,
        help="seed of every random draw: env i starts from SEED + i (no-ops, sticky actions), the agent's "
        "sampling and epsilon from SEED; the same seed, model and protocol play the same games, with "
        "--jobs and --vector too; written to the eval record (default: %(default)s)",
    )
    p.add_argument(
        "--device", default="auto", help="torch device: auto, cpu, cuda, cuda:N (default: %(default)s)"
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="write each model's eval record (scores, protocol settings, command) to "
        "DIR/<run>.<protocol>.json for `retrokit report` (default: none written)",
    )
    p.add_argument(
        "--vector",
        action="store_true",
        help="step each model's envs with the kit's vector backend (gym.make_vec; ALE: the native backend's "
        "threads) instead of one loop over single envs; the first N games to end count (default: off)",
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="models evaluated at once, each in its own process (default: %(default)s)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print each result as one JSON line on stdout (default: off, a line of text)",
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
    check_targets_exist([target])
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
        model = _load(path, config, device)
        check_model_fits(model, env_id, obs_space, action_space)
    return model, path, env_id, kwargs


def _load(path: str, config: dict | None, device: str) -> Any:
    """The model at ``path`` with the engine of its run (``config``), or, without a run (only reached with
    --allow-pickle), SB3's own loader."""
    if config is None:
        return engine("sb3").load_model(path, device=device, algo=None, allow_pickle=True)
    return engine(config["engine"]).load_model(path, device=device, algo=config["algo"])


def load_for_protocol(
    target: str,
    env: str | None,
    env_kwargs: dict,
    device: str,
    protocol: str,
    seed: int,
    allow_pickle: bool = False,
) -> tuple[Any, str, str, dict, dict | None, dict]:
    """:func:`load_target` under an evaluation protocol: ``(model as the protocol plays it, path, env id, env
    kwargs with the protocol's settings, run config or None, notes for the record)``. The protocol's
    settings go over the run's own env kwargs, without those of the protocol it trained under
    (``protocols.run_env_kwargs``), then ``env_kwargs``."""
    from retro_atari_kit.evaluation import check_model_fits, protocol_env_kwargs
    from retro_atari_kit.evaluation.protocols import protocol_model
    from retro_atari_kit.protocols import run_env_kwargs
    from retro_atari_kit.registration import probe_env
    from retro_atari_kit.runs.startup import check_device

    with user_errors():
        check_device(device)
        path, env_id, kwargs, config = resolve_target(target, env, env_kwargs, allow_pickle)
        if config is not None:
            own = run_env_kwargs(config.get("env_kwargs", {}), config.get("protocol"))
            kwargs = {**own, **env_kwargs}
        kwargs = protocol_env_kwargs(protocol, env_id, kwargs)
        obs_space, action_space = probe_env(env_id, kwargs)
        algo = config["algo"] if config else None
        model = _load(path, config, device)
        notes_steps = getattr(model, "num_timesteps", None)
        if algo is None:  # a bare SB3 file: its class says whether it is value-based
            algo = type(model).__name__.lower()
        played, notes = protocol_model(
            model, protocol, env_id, algo, seed=seed, n_env_actions=getattr(action_space, "n", None)
        )
        check_model_fits(played, env_id, obs_space, action_space)
    return played, path, env_id, kwargs, config, {**notes, "steps": notes_steps}


def evaluate_target(target: str, options: dict[str, Any], progress: Any = None) -> dict[str, Any]:
    """Load and evaluate one target; returns its eval record (written where ``options["out"]`` says).
    ``progress``: a callable or a queue (``put``) that receives each progress line."""
    from retro_atari_kit.evaluation import evaluate_model, get_protocol
    from retro_atari_kit.evaluation.play import evaluate_model_vector
    from retro_atari_kit.evaluation.records import make_record, write_record

    def say(line: str) -> None:
        if progress is None:
            print(line, file=sys.stderr, flush=True)
        elif hasattr(progress, "put"):
            progress.put(line)
        else:
            progress(line)

    protocol = target_protocol(target, options["protocol"])
    model, path, env_id, kwargs, config, notes = load_for_protocol(
        target,
        options["env"],
        options["env_kwargs"],
        options["device"],
        protocol,
        options["seed"],
        options.get("allow_pickle", False),
    )
    steps = notes.pop("steps")
    run = record_run_name(target)
    settings = get_protocol(protocol).settings(int(kwargs.get("frame_skip", 4)))
    episodes = options["episodes"]
    how = (
        "epsilon-greedy {:g}".format(notes["epsilon"])
        if "epsilon" in notes
        else ("deterministic" if options["deterministic"] else "stochastic")
    )
    say(
        f"evaluating {path} ({steps} steps) on {env_id}: {episodes} games, {how} actions, "
        + (
            f"protocol {protocol} {json.dumps(settings['env_kwargs'], sort_keys=True)}"
            if protocol != "training"
            else "protocol training (the default stack with the run's env kwargs)"
        )
        + (" (minimal actions mapped into the full action set)" if "action_map" in notes else "")
    )
    lengths: list[int] = []

    def game_ended(k: int, score: float, game_steps: int) -> None:
        # as each game ends (a long evaluation is never silent); stdout keeps the results
        lengths.append(game_steps)
        prefix = f"{run}: " if options["many"] else ""
        say(f"{prefix}game {k}/{episodes}: {score:g} ({game_steps} steps)")

    play = evaluate_model_vector if options.get("vector") else evaluate_model
    scores = play(
        model,
        env_id,
        kwargs,
        episodes=episodes,
        seed=options["seed"],
        deterministic=options["deterministic"] or "epsilon" in notes,
        on_game=game_ended,
    )
    if options.get("vector"):
        notes["vector"] = True
    record = make_record(
        scores=scores,
        lengths=lengths,
        env_id=env_id,
        protocol=settings,
        env_kwargs=kwargs,
        run=run,
        model=path,
        config=config,
        steps=steps,
        eval_seed=options["seed"],
        deterministic=options["deterministic"],
        command=options["command"],
        notes=notes,
    )
    if options["out"] is not None:
        with user_errors():
            record["written"] = write_record(record, options["out"])
    return record


def _evaluate_in_worker(target: str, options: dict[str, Any], queue: Any) -> dict[str, Any]:
    """A ``--jobs`` worker: the kit's CLI state (quiet ALE banner) is set up again in the spawned process."""
    from retro_atari_kit.envs._quiet import quiet_ale_banner

    quiet_ale_banner()
    return evaluate_target(target, options, queue)


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.evaluation import summarize

    options = {
        "env": args.env,
        "env_kwargs": parse_env_kwargs(args.env_kwargs),
        "device": args.device,
        "protocol": args.protocol,
        "seed": args.seed,
        "episodes": args.episodes,
        "deterministic": args.deterministic,
        "out": args.out,
        "many": len(args.targets) > 1,
        "vector": args.vector,
        "allow_pickle": args.allow_pickle,
        "command": getattr(args, "command_line", "retrokit eval"),
    }
    check_targets_exist(args.targets)  # a typo in the last of several targets is said before hours of play
    if args.out is not None:  # before any model is loaded or game played
        check_outputs(args.targets, args.out, args.protocol)
    records = []
    if args.jobs == 1 or len(args.targets) == 1:
        for target in args.targets:
            records.append(evaluate_target(target, options))
            print_result(records[-1], summarize, args.json, options["many"])
    else:
        records = run_parallel(args.targets, options, args.jobs)
        for record in records:
            print_result(record, summarize, args.json, options["many"])
    return 0


def record_run_name(target: str) -> str:
    """The run name of ``target`` in its eval record and its file name: a run dir's folder name, the name of
    the run dir a model file is in, else the model file's name without its extension."""
    from retro_atari_kit.runs import find_run_dir

    if os.path.isdir(target):
        return os.path.basename(os.path.abspath(target))  # "." and "run/" name the folder itself
    run_dir = find_run_dir(target)
    return os.path.basename(run_dir) if run_dir else os.path.splitext(os.path.basename(target))[0]


def target_protocol(target: str, given: str | None) -> str:
    """The protocol to evaluate ``target`` under: ``given``, else the one its run trained under (config.yaml's
    ``protocol``); ``training`` for a run made before protocols were recorded and a model outside a run."""
    from retro_atari_kit.runs import find_run_dir, load_config

    if given:
        return given
    run = target if os.path.isdir(target) else find_run_dir(target)
    if run is None:
        return "training"
    with user_errors():
        return str(load_config(run).get("protocol") or "training")


def check_outputs(targets: list[str], out: str, protocol: str | None) -> None:
    """CliError, before any model is loaded, unless every target's eval record can be written to ``out``:
    a folder (made if missing) that takes new files, each record's name fits, no folder sits where a record
    goes, and no two targets share a record file (``a/run`` and ``b/run`` are both ``run``)."""
    from retro_atari_kit.evaluation.records import record_name
    from retro_atari_kit.files import check_creatable, os_error_message

    if os.path.exists(out) and not os.path.isdir(out):
        raise CliError(f"--out {out}: not a folder; pass a folder for the eval records")
    owners: dict[str, str] = {}
    for target in targets:
        path = os.path.join(out, record_name(record_run_name(target), target_protocol(target, protocol)))
        first = owners.get(path)
        owners[path] = target
        if first is not None and os.path.realpath(first) == os.path.realpath(target):
            raise CliError(f"{target} is given twice; evaluate each run dir or model once")
        if first is not None:
            raise CliError(
                f"{first} and {target} would both be written to {path} (their runs share a name): "
                "evaluate them with different --out folders, or rename one"
            )
        if os.path.isdir(path):
            raise CliError(f"--out {out}: {path} is a folder where the eval record of {target} goes; move it")
        try:  # a name too long, /proc, a read-only folder: said before a game is played, not after
            check_creatable(path)
        except OSError as exc:
            raise CliError(os_error_message(exc, "--out", flag="--out")) from None


def run_parallel(targets: list[str], options: dict[str, Any], jobs: int) -> list[dict[str, Any]]:
    """Evaluate ``targets``, ``jobs`` at once in spawned processes; progress lines are printed here, as the
    workers send them. Results come back in the order of ``targets``."""
    import multiprocessing
    import queue as queue_module
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        lines = manager.Queue()
        futures = [pool.submit(_evaluate_in_worker, t, options, lines) for t in targets]
        while not all(f.done() for f in futures):
            try:
                print(lines.get(timeout=0.2), file=sys.stderr, flush=True)
            except queue_module.Empty:
                pass
        while not lines.empty():
            print(lines.get(), file=sys.stderr, flush=True)
        return [f.result() for f in futures]  # a worker's CliError is raised here, one line


def print_result(record: dict[str, Any], summarize: Any, as_json: bool, many: bool = False) -> None:
    s = summarize(record["scores"])
    if as_json:
        keys = ("model", "env_id", "steps", "run", "protocol", "human_normalized_mean")
        print(json.dumps({**{k: record[k] for k in keys}, **s, "scores": record["scores"]}))
        return
    prefix = f"{record['run']} ({record['protocol']['protocol']}): " if many else ""
    print(
        f"{prefix}true score over {s['episodes']} games: mean {s['mean']:.2f}  std {s['std']:.2f}  "
        f"min {s['min']:.1f}  max {s['max']:.1f}"
    )
    hns = record.get("human_normalized_mean")
    if hns is not None:  # on stderr: stdout keeps the one result line it always had
        print(f"{prefix}human-normalised mean score: {hns:.3f} (1.0 = human, 0.0 = random)", file=sys.stderr)
    if record.get("written"):
        print(f"wrote {record['written']}", file=sys.stderr)
