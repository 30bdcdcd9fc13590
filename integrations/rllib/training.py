"""``retrokit train ... --engine rllib``: the RLlib engine behind the CLI, on the kit's run layer.

The engine interface (``runs.engine.ENGINE_INTERFACE``, the same as the SB3 engine's): ``RULES`` (its part of
the run layer's new-run and resume checks, :mod:`.rules`, which the run layer calls down into),
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
from retro_atari_kit.integrations.rllib.policy import POLICY_FILE, load_model
from retro_atari_kit.integrations.rllib.rules import RULES, require_ray

from retro_atari_kit.models.threads import learner_threads
from retro_atari_kit.processes import stop_signals_blocked
from retro_atari_kit.registration import probe_env
from retro_atari_kit.runs import (
    RunError,
    StopRequest,
    begin_segment,
    final_model_path,
    list_checkpoints,
    merge_progress,
    publish_final_model,
    training_session,
)
from retro_atari_kit.runs.layout import single_env_kwargs
from retro_atari_kit.runs.startup import finished_lines, segment_seed, stopped_lines

# the engine interface (export_model, latest_model and save_checkpoint live in .checkpoints)
__all__ = [
    "budget_warning",
    "export_model",
    "latest_model",
    "load_model",
    "RULES",
    "run_steps",
    "save_checkpoint",
    "train",
]


def _spaces(config: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    """(observation shape, number of actions) of the config's env, recorded in every ``policy.pt``."""
    obs_space, action_space = probe_env(config["env_id"], single_env_kwargs(config.get("env_kwargs")))
    return tuple(obs_space.shape), int(action_space.n)


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
                # "local": the kit's own Ray, even beside another job's cluster on the same host (a plain
                # ray.init() would join that one, the last `ray start` or RAY_ADDRESS, and refuse num_cpus)
                ray.init(
                    address="local",
                    num_cpus=os.cpu_count() or 1,
                    include_dashboard=False,
                    logging_level="warning",
                )
    except ConnectionError as exc:
        raise RunError(f"cannot connect to Ray at {address}: {str(exc).strip().splitlines()[0]}") from None
    return True


def budget_warning(algo: str, rl_config: Any, timesteps: int) -> str | None:
    """One ``warning:`` line when ``timesteps`` is too small for ``algo`` as configured, else None (the run
    goes on, as RLlib itself would: the SB3 engine says the same of its algorithms).

    DQN learns nothing before ``num_steps_sampled_before_learning_starts``; PPO samples a whole train batch
    per iteration (so a smaller budget is one batch and a single update), APPO / IMPALA update once a
    train batch has arrived (a smaller budget may end before the first update)."""
    if algo == "dqn":
        key = "num_steps_sampled_before_learning_starts"
        starts = int(getattr(rl_config, key) or 0)
        if timesteps <= starts:
            return (
                f"warning: --timesteps {timesteps} is not more than dqn's {key} ({starts}): the run only "
                f"fills its replay buffer and learns nothing; pass --timesteps above {starts} or --set "
                f"{key}=N below {timesteps}"
            )
        return None
    batch = int(rl_config.total_train_batch_size or 0)
    if timesteps < batch:
        what = (
            f"the run samples {batch} steps and makes a single update"
            if algo == "ppo"
            else "the run may end before the learner's first update"
        )
        return (
            f"warning: --timesteps {timesteps} is less than one {algo} train batch ({batch} steps): {what}; "
            f"pass --timesteps {batch} or more (or a smaller --set train_batch_size_per_learner)"
        )
    return None


def true_score_text(score: float | None) -> str:
    """The progress line's score: the mean true score of the last 100 games, or that none has ended."""
    return "no game finished yet" if score is None else f"true score {score:.2f}"


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

    Ctrl-C / SIGTERM stop after the current iteration, save a checkpoint and return normally. Ray's own
    messages (its warnings, its workers' lines) go to the run's ``log.txt``, not to the terminal.
    """
    require_ray()
    from retro_atari_kit.integrations.rllib.logs import ray_messages_into

    # RLlib reads paths as URIs (pyarrow): a relative one ("runs/x") has no scheme and fails to restore
    run_dir = os.path.abspath(run_dir)
    resume_from = None if resume_from is None else os.path.abspath(resume_from)
    with training_session(run_dir, new_run=resume_from is None, out=out) as stop:
        segment, start = 0, 0
        if resume_from is not None:  # under the lock: the logs of a resumed run are touched here
            start = next((s for s, p in list_checkpoints(run_dir) if p == resume_from), 0)
            saved_at = os.path.getmtime(os.path.join(resume_from, POLICY_FILE))
            segment = begin_segment(run_dir, start, saved_at, out)
        log = os.path.join(run_dir, "log.txt")
        with ray_messages_into(log) as quiet:
            if quiet:
                out(f"Ray's own messages: {log}")
            return _train_with_ray(config, run_dir, resume_from, segment, start, stop, out)


def _train_with_ray(
    config: dict[str, Any],
    run_dir: str,
    resume_from: str | None,
    segment: int,
    start: int,
    stop: StopRequest,
    out: Callable[[str], None],
) -> dict[str, Any]:
    """Start (or join) Ray, build the algorithm, train, and leave Ray as it was found."""
    import ray
    from retro_atari_kit.integrations.rllib.checks import validate
    from retro_atari_kit.integrations.rllib.config import algo_config
    from retro_atari_kit.integrations.rllib.envs import check_nodes
    from retro_atari_kit.integrations.rllib.logs import RunLogger

    spaces = _spaces(config)
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
        check_nodes(config["env_id"], single_env_kwargs(config.get("env_kwargs")))
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
        warning = budget_warning(config["algo"], rl_config, int(config["timesteps"]))
        if warning:
            out(warning)
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
                f"{true_score_text(row['rollout/ep_rew_mean'])}"
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
