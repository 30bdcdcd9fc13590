"""``retrokit train ... --engine rllib``: the RLlib engine behind the CLI, on the kit's run layer.

The engine interface the CLI calls (the same as the SB3 engine's): :func:`prepare`, :func:`prepare_resume`,
:func:`train`, :func:`load_model`, :func:`latest_model`, :func:`export_model`. The run directory (config,
lock, checkpoints, monitor CSVs, progress merging) is ``retro_atari_kit.runs``; RLlib checkpoints are
directories ``checkpoints/model_<steps>_steps/`` (RLlib's full algorithm state, plus ``policy.pt`` for
torch-only eval), and ``model`` is a copy of the last one when a run finishes. Ray is imported only when
training.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from retro_atari_kit.integrations.rllib.checkpoints import (
    env_steps,
    export_model,
    latest_model,
    run_steps,
    save_checkpoint,
)
from retro_atari_kit.integrations.rllib.hyperparams import ALGOS, get_preset, with_overrides
from retro_atari_kit.integrations.rllib.policy import (
    POLICY_FILE,
    load_model,
)

from retro_atari_kit.models.threads import learner_threads
from retro_atari_kit.processes import stop_signals_blocked
from retro_atari_kit.runs import (
    CONFIG_FILE,
    ENGINE_OPTIONS,
    RunError,
    StopRequest,
    TrainSpec,
    begin_segment,
    create_run_dir,
    default_run_dir,
    final_model_path,
    list_checkpoints,
    merge_progress,
    new_config,
    open_for_resume,
    publish_final_model,
    set_total_timesteps,
    training_session,
    write_config,
)
from retro_atari_kit.runs.startup import (
    check_backend,
    check_device,
    check_gpus,
    finished_lines,
    segment_seed,
    stopped_lines,
)

ENGINE = "rllib"
INSTALL = 'pip install "retro-atari-kit[rllib]"'

# the engine interface (export_model, latest_model and save_checkpoint live in .checkpoints)
__all__ = [
    "export_model",
    "latest_model",
    "load_model",
    "prepare",
    "prepare_resume",
    "run_steps",
    "save_checkpoint",
    "train",
]


def _require_ray() -> None:
    try:
        import ray.rllib  # noqa: F401
    except ImportError as exc:
        raise RunError(f"--engine rllib needs Ray RLlib, which is not installed ({exc}); {INSTALL}") from None


def _probe(env_id: str, env_kwargs: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    """Make the env once here: validates the ID, kwargs and ROM; returns (obs shape, number of actions)."""
    from retro_atari_kit.integrations.rllib.envs import worker_env_id

    from retro_atari_kit.registration import make_env

    kwargs = {k: v for k, v in env_kwargs.items() if k != "backend"}  # a vector-env kwarg only
    try:
        env = make_env(worker_env_id(env_id), **kwargs)
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001  (bad kwargs, missing ROM: one line)
        raise RunError(f"cannot make {env_id}: {str(exc).strip().splitlines()[0]}") from None
    try:
        return tuple(env.observation_space.shape), int(env.action_space.n)
    finally:
        env.close()


def prepare(spec: TrainSpec, force: bool = False, out: Callable[[str], None] = print) -> tuple[dict, str]:
    """Validate ``spec``, create the run dir and write its ``config.yaml``; returns ``(config, run_dir)``.

    ``spec.engine_options`` may hold ``num_env_runners``, ``num_envs_per_env_runner``, ``address``
    (``auto`` or ``HOST:PORT``; none: a local Ray on the local CPUs) and ``num_gpus`` (learner GPUs).
    """
    _require_ray()
    from retro_atari_kit.integrations.rllib.checks import check_settings

    if spec.algo not in ALGOS:
        raise RunError(f"unknown algo {spec.algo!r} for --engine rllib; choose one of {', '.join(ALGOS)}")
    if spec.eval_every:
        raise RunError(
            "--eval-every is not available with --engine rllib; run `retrokit eval` on checkpoints"
        )
    if spec.save_replay_buffer:
        raise RunError("--save-replay-buffer is not available with --engine rllib (RLlib checkpoints decide)")
    # the run layer's engine-neutral checks (the CLI has run them all: check_new_run), repeated here for
    # callers of this function; then RLlib's own: it places a learner on "a GPU", never on a given one
    check_device(spec.device)
    check_gpus(spec.engine_options.get("num_gpus"))
    if ":" in spec.device:
        raise RunError(f"--device {spec.device}: --engine rllib places its learner itself; use --device cuda")
    check_backend(spec.env_id, spec.backend, spec.env_kwargs)
    env_kwargs = dict(spec.env_kwargs)
    if spec.backend != "auto":
        env_kwargs["backend"] = spec.backend
    obs_shape, _ = _probe(spec.env_id, env_kwargs)
    options = dict(spec.engine_options)
    unknown = set(options) - set(ENGINE_OPTIONS[ENGINE])
    if unknown:
        raise RunError(f"unknown RLlib option {sorted(unknown)[0]!r}")
    hyper = with_overrides(get_preset(spec.algo, spec.preset), spec.overrides)
    if spec.n_envs and not options.get("num_envs_per_env_runner"):
        runners = max(int(options.get("num_env_runners") or 1), 1)
        options["num_envs_per_env_runner"] = -(-int(spec.n_envs) // runners)
    if options.get("num_envs_per_env_runner"):
        hyper["num_envs_per_env_runner"] = int(options["num_envs_per_env_runner"])
    # kinds, ranges, the module and RLlib's validate(), without Ray: a bad --set fails here, not in ray.init
    check_settings(spec.algo, spec.env_id, spec.network, hyper, env_kwargs, options, spec.device, obs_shape)
    config = new_config(
        ENGINE,
        spec.command,
        algo=spec.algo,
        env_id=spec.env_id,
        network=spec.network,
        preset=spec.preset,
        seed=int(spec.seed),
        timesteps=int(spec.timesteps),
        device=spec.device,
        env_kwargs=env_kwargs,
        checkpoint_every=int(spec.checkpoint_every),
        rllib={
            "num_env_runners": options.get("num_env_runners"),
            "address": options.get("address"),
            "num_gpus": options.get("num_gpus"),
        },
        hyperparameters=hyper,
    )
    from retro_atari_kit.integrations.rllib.envs import check_address

    check_address(options.get("address"))  # before anything is written
    run_dir = spec.run_dir or default_run_dir(spec.env_id, spec.algo, spec.network, spec.seed)
    create_run_dir(run_dir, force=force)
    write_config(run_dir, config)
    out(f"RLlib {spec.algo} on {spec.env_id} ({spec.network} CNN), {spec.timesteps} steps -> {run_dir}")
    return config, run_dir


def prepare_resume(
    run_dir: str, timesteps: int | None = None, out: Callable[[str], None] = print
) -> tuple[dict, str, str]:
    """The run's config (with a new total ``timesteps`` if given) and its newest complete checkpoint."""
    config = open_for_resume(run_dir)
    if config.get("engine") != ENGINE:
        raise RunError(
            f"{run_dir} was trained with --engine {config.get('engine')}; resume it with that engine"
        )
    _require_ray()
    from retro_atari_kit.integrations.rllib import resume

    ckpts = [c for c in list_checkpoints(run_dir) if os.path.isfile(os.path.join(c[1], POLICY_FILE))]
    if not ckpts:
        raise RunError(f"{run_dir} has no checkpoint to resume from; start a new run with --force")
    payload = resume.checkpoint_payload(ckpts[-1][1])  # every check before anything is written
    if "algo" in config:  # first: the hyperparameters are checked against the algo
        resume.check_checkpoint_algo(ckpts[-1][1], payload, config["algo"])
    module = resume.check_resumed_config(config, os.path.join(run_dir, CONFIG_FILE))
    spaces = _probe(config["env_id"], config.get("env_kwargs") or {})
    resume.check_checkpoint_spaces(ckpts[-1][1], payload, spaces)
    resume.check_checkpoint_network(ckpts[-1][1], payload, module)
    set_total_timesteps(run_dir, config, timesteps, ckpts[-1][0])
    out(f"resuming from {ckpts[-1][1]} ({ckpts[-1][0]} steps)")
    return config, run_dir, ckpts[-1][1]


def _connect(config: dict[str, Any]) -> bool:
    """Connect to (or start) Ray; True if this call started it (and so must shut it down)."""
    import ray
    from retro_atari_kit.integrations.rllib.envs import check_address

    if ray.is_initialized():
        return False
    address = (config.get("rllib") or {}).get("address")
    check_address(address)
    try:
        # Ray's processes (GCS, raylet and its agents) are born with the stop signals blocked and never see
        # them: a SIGTERM to the whole group must not take Ray down before the stop checkpoint is saved
        with stop_signals_blocked():
            if address:
                ray.init(address=address, include_dashboard=False, logging_level="warning")
            else:
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, logging_level="warning")
    except ConnectionError as exc:
        raise RunError(f"cannot connect to Ray at {address}: {str(exc).strip().splitlines()[0]}") from None
    return True


def _runner_settings(config: dict[str, Any]) -> dict[str, Any]:
    """Resolved runner / learner counts: unset runners = the cluster's CPUs minus one (the driver's)."""
    import ray
    from retro_atari_kit.integrations.rllib.checks import runner_settings

    cpus = int(ray.cluster_resources().get("CPU", 2))
    return runner_settings(config.get("rllib") or {}, config.get("device"), cpus)  # type: ignore[return-value]


def train(
    config: dict[str, Any], run_dir: str, resume_from: str | None = None, out: Callable[[str], None] = print
) -> dict[str, Any]:
    """Train (or continue) the run. Returns ``{"steps", "interrupted", "model"}``.

    Ctrl-C / SIGTERM stop after the current iteration, save a checkpoint and return normally.
    """
    _require_ray()
    import ray
    from retro_atari_kit.integrations.rllib.checks import validate
    from retro_atari_kit.integrations.rllib.config import algo_config
    from retro_atari_kit.integrations.rllib.envs import check_nodes
    from retro_atari_kit.integrations.rllib.logs import RunLogger

    # RLlib reads paths as URIs (pyarrow): a relative one ("runs/x") has no scheme and fails to restore
    run_dir = os.path.abspath(run_dir)
    resume_from = None if resume_from is None else os.path.abspath(resume_from)
    with training_session(run_dir, new_run=resume_from is None, out=out) as stop:
        segment, start = 0, 0
        if resume_from is not None:  # under the lock: the logs of a resumed run are touched here
            start = next((s for s, p in list_checkpoints(run_dir) if p == resume_from), 0)
            saved_at = os.path.getmtime(os.path.join(resume_from, POLICY_FILE))
            segment = begin_segment(run_dir, start, saved_at, out)
        spaces = _probe(config["env_id"], config.get("env_kwargs") or {})
        try:
            started = _connect(config)
        except SystemExit as exc:  # ray.init turns SIGTERM into sys.exit(SIGTERM) while it starts Ray
            if exc.code != signal.SIGTERM:
                raise
            if ray.is_initialized():
                ray.shutdown()
            stop.request(signal.SIGTERM)
            stop.raise_if_requested("interrupted before training started")
        stop.reinstall()  # ray.init replaced the SIGTERM handler: a stop must still end in a checkpoint
        algo = logger = None
        try:
            check_nodes(
                config["env_id"],
                {k: v for k, v in (config.get("env_kwargs") or {}).items() if k != "backend"},
            )
            settings = _runner_settings(config)
            if not (config.get("rllib") or {}).get("address") and not settings.get("num_learners"):
                # the learner runs in this process beside its env runners (one machine): the thread rule
                learner_threads(settings["num_env_runners"])
            hyper = {**config["hyperparameters"], **settings}
            rl_config = algo_config(
                config["algo"],
                config["env_id"],
                config["network"],
                env_kwargs=config.get("env_kwargs") or {},
                seed=segment_seed(config["seed"], segment),  # fresh env randomness per resume
                **hyper,
            )
            envs = rl_config.num_envs_per_env_runner * max(rl_config.num_env_runners, 1)
            out(f"{settings['num_env_runners']} env runner(s) x {rl_config.num_envs_per_env_runner} envs")
            validate(rl_config)  # checked before Ray started, unless the runners are the cluster's
            algo = rl_config.build_algo()
            if resume_from is not None:
                from retro_atari_kit.integrations.rllib.resume import restore

                restore(algo, resume_from)
            stop.raise_if_requested("interrupted before training started")
            logger = RunLogger(run_dir, config["env_id"], envs, segment, start)
            return _loop(algo, config, run_dir, start, spaces, out, logger, stop)
        finally:
            if logger is not None:
                logger.close()
            note = merge_progress(run_dir)
            if note:
                out(note)
            if algo is not None:
                algo.stop()
            if started:
                ray.shutdown()


def _loop(
    algo: Any,
    config: dict,
    run_dir: str,
    start: int,
    spaces: tuple,
    out: Callable[[str], None],
    logger: Any,
    stop: StopRequest,
) -> dict[str, Any]:
    """Train until ``config["timesteps"]`` or a stop request; checkpoint on the way and at the end.

    The stop signals stay caught until the last checkpoint is written, so a second Ctrl-C waits for it.
    """
    base = env_steps(algo)  # RLlib's counter (restored or not): count this segment's steps from here
    steps = start
    every = int(config.get("checkpoint_every") or 0)
    next_ckpt = (steps // every + 1) * every if every else None
    t0 = time.time()
    while steps < config["timesteps"] and not stop.requested:
        result = algo.train()
        steps = run_steps(steps, start, base, env_steps(algo))
        row = logger.log(result, steps)
        if next_ckpt is not None and steps >= next_ckpt:
            save_checkpoint(algo, run_dir, steps, config, spaces)
            next_ckpt = (steps // every + 1) * every
        if time.time() - t0 > 30 or steps >= config["timesteps"]:
            t0 = time.time()
            out(
                f"{steps} steps, {row['time/fps']:.0f} steps/s, {logger.games} games, "
                f"true score {row['rollout/ep_rew_mean']}"
            )
    path = save_checkpoint(algo, run_dir, steps, config, spaces)
    if stop.requested:
        for line in stopped_lines(run_dir, steps, path):
            out(line)
        return {"steps": steps, "interrupted": True, "model": path}
    final = final_model_path(run_dir, suffix="")
    publish_final_model(path, final)
    out(f"done: {steps} steps; in {run_dir}: model/, config.yaml, checkpoints/, monitor/, progress.csv")
    for line in finished_lines(run_dir):
        out(line)
    return {"steps": steps, "interrupted": False, "model": final}
