"""A ``retrokit train`` run on SB3: prepare (validate everything, then create the run dir), train, resume.

The run directory (layout, config, lock, checkpoints' names, monitor CSVs, progress merging) is the core's
``retro_atari_kit.runs``; this module only adds what is SB3's: the model, its logger and callbacks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import yaml
from retro_atari_kit.integrations.sb3.algorithms import OFF_POLICY, algo_class
from retro_atari_kit.integrations.sb3.training.callbacks import training_callbacks
from retro_atari_kit.integrations.sb3.training.config import (
    algo_kwargs,
    check_model_builds,
    check_resumed_config,
    resolve_config,
)
from retro_atari_kit.integrations.sb3.training.memory import (
    check_memory,
    estimate_memory,
    estimate_vram,
    format_bytes,
)
from retro_atari_kit.integrations.sb3.training.models import (
    REPLAY_FILE,
    check_checkpoint_algo,
    check_checkpoint_spaces,
    checkpoint_data,
    load_model,
    read_steps_of,
    save_checkpoint,
    save_final,
)

from retro_atari_kit.registration import probe_env
from retro_atari_kit.runs import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    RunError,
    StopRequest,
    TrainSpec,
    begin_segment,
    check_new_run_dir,
    create_run_dir,
    default_run_dir,
    list_checkpoints,
    merge_progress,
    monitor_dir,
    open_for_resume,
    progress_path,
    set_total_timesteps,
    training_session,
    write_config,
)
from retro_atari_kit.runs.startup import finished_lines, segment_seed, stopped_lines
from retro_atari_kit.vector import resolve_backend

Print = Callable[[str], None]


def make_train_env(config: dict[str, Any], monitor_dir: str | None, seed: int | None = None) -> Any:
    """The SB3 VecEnv for training (the kit's launcher: fastest backend, true-score monitor CSVs)."""
    from retro_atari_kit.integrations.sb3.launcher import make_vec_env

    return make_vec_env(
        config["env_id"],
        n_envs=config["n_envs"],
        seed=config["seed"] if seed is None else seed,
        backend=config.get("backend", "auto"),
        monitor_dir=monitor_dir,
        **config["env_kwargs"],
    )


def make_logger(run_dir: str, segment: int) -> Any:
    """SB3 logger writing log.txt (appended on resume), progress CSV of the segment, tensorboard."""
    from stable_baselines3.common.logger import (
        CSVOutputFormat,
        HumanOutputFormat,
        Logger,
        TensorBoardOutputFormat,
    )

    human = HumanOutputFormat(open(os.path.join(run_dir, "log.txt"), "a"))  # noqa: SIM115 - owned by the format
    human.own_file = True  # so Logger.close() closes the handle we opened
    formats = [human, CSVOutputFormat(progress_path(run_dir, segment))]
    try:
        formats.append(TensorBoardOutputFormat(run_dir))
    except ImportError:
        pass
    return Logger(folder=run_dir, output_formats=formats)


def precision_of(model: Any) -> str:
    """One line saying in which precision the model's CNN runs (bf16 autocast only where it is native)."""
    from retro_atari_kit.integrations.sb3.extractors import KitExtractor

    extractor = next((m for m in model.policy.modules() if isinstance(m, KitExtractor)), None)
    if extractor is None or not extractor.autocast:
        return f"precision: float32 on {model.device}"
    if extractor.runs_in_bf16(model.device):
        return f"precision: CNN under bf16 autocast ({model.device} has native bf16); heads, losses float32"
    return (
        f"precision: float32 on {model.device} (autocast='bf16' ignored: no native bf16 here, and "
        "emulated bf16 is slower than float32)"
    )


def describe(config: dict[str, Any], run_dir: str) -> str:
    """The resolved configuration as printed before training."""
    return f"run dir: {run_dir}\n{yaml.safe_dump(config, sort_keys=False).rstrip()}"


def prepare(spec: TrainSpec, force: bool = False, out: Print = print) -> tuple[dict[str, Any], str]:
    """Resolve and validate a new run (env, ROM, backend, hyperparameters, memory, run dir), then create
    the run dir with its config. Nothing is written before every check passed."""
    config = resolve_config(spec)
    if config["save_replay_buffer"] and config["algo"] not in OFF_POLICY:  # it would be silently ignored
        raise RunError(
            f"--save-replay-buffer: {config['algo']} has no replay buffer "
            f"({' and '.join(OFF_POLICY)} have one); drop it"
        )
    obs_space, _ = probe_env(config["env_id"], config["env_kwargs"])
    game = gym.spec(config["env_id"]).kwargs["game"]
    try:
        resolve_backend(game, config["backend"], **config["env_kwargs"])
    except ValueError as exc:
        raise RunError(f"--backend {config['backend']}: {exc}") from None
    check_model_builds(config)
    est = estimate_memory(config, obs_space)
    run_dir = spec.run_dir or default_run_dir(
        config["env_id"], config["algo"], config["network"], config["seed"]
    )
    summary = check_memory(est, force)
    check_new_run_dir(run_dir, force)
    out(describe(config, run_dir))
    if config.get("preset_n_envs") and config["preset_n_envs"] != config["n_envs"]:
        out(
            f"note: preset {config['preset']!r} was tuned with n_envs={config['preset_n_envs']}; "
            f"using {config['n_envs']} (--n-envs {config['preset_n_envs']} to match)"
        )
    out(summary)
    if config["device"].startswith("cuda") or (config["device"] == "auto" and _cuda_available()):
        out(f"estimated VRAM ~{format_bytes(estimate_vram(est))}")
    create_run_dir(run_dir, force)
    write_config(run_dir, config)
    return config, run_dir


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def prepare_resume(run_dir: str, timesteps: int | None = None, out: Print = print) -> tuple[dict, str, str]:
    """Validate a resume of ``run_dir``; returns (config, run_dir, checkpoint to start from).

    Everything is checked before anything is written: every field of config.yaml (it may have been edited by
    hand), the env it makes, and that the newest checkpoint was written by the config's algorithm for that
    env. Only then does ``timesteps`` (a new total, never below the checkpoint's steps) go into config.yaml.
    """
    config = open_for_resume(run_dir)
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        raise RunError(f"--resume {run_dir}: no checkpoint in {run_dir}/{CHECKPOINT_DIR}; start a new run")
    steps, path = checkpoints[-1]
    data = checkpoint_data(path)
    if data is None:
        raise RunError(f"cannot read checkpoint {path}; delete it to resume from the previous one")
    if "algo" in config:  # first: the hyperparameters are checked against the algo
        check_checkpoint_algo(path, data, config["algo"])
    check_resumed_config(config, os.path.join(run_dir, CONFIG_FILE))
    obs_space, action_space = probe_env(config["env_id"], config["env_kwargs"])
    check_checkpoint_spaces(path, data, obs_space, action_space)
    game = gym.spec(config["env_id"]).kwargs["game"]
    try:
        resolve_backend(game, config.get("backend", "auto"), **config["env_kwargs"])
    except ValueError as exc:
        raise RunError(f"{run_dir}/{CONFIG_FILE}: backend: {exc}") from None
    set_total_timesteps(run_dir, config, timesteps, steps)
    out(describe(config, run_dir))
    out(f"resuming from {path} ({steps} steps)")
    return config, run_dir, path


def _build_model(
    config: dict[str, Any], run_dir: str, venv: Any, resume_from: str | None, out: Print, cls: type
) -> Any:
    algo = config["algo"]
    if resume_from is None:
        kwargs = algo_kwargs(config)
        policy = kwargs.pop("policy")
        return cls(policy, venv, seed=config["seed"], device=config["device"], verbose=0, **kwargs)
    model = load_model(resume_from, env=venv, device=config["device"], algo=algo, cls=cls)
    replay = os.path.join(run_dir, CHECKPOINT_DIR, REPLAY_FILE)
    if algo in OFF_POLICY and os.path.exists(replay):
        model.load_replay_buffer(replay)
        out(f"replay buffer restored from {replay}")
    return model


def train(
    config: dict[str, Any], run_dir: str, resume_from: str | None = None, out: Print = print
) -> dict[str, Any]:
    """Train (or continue) the run. Returns ``{"steps", "interrupted", "model"}``.

    Ctrl-C / SIGTERM (``retro_atari_kit.runs.stop``): before training started, StopRequested (a new run is
    removed, a resumed one left as it was); once training runs, training ends at the next step with a
    checkpoint, and a second signal waits for that save. A new run that fails before its first checkpoint is
    removed (nothing of value was saved), so the same command can simply be re-run.
    """
    with training_session(run_dir, new_run=resume_from is None, out=out) as stop:
        segment = 0
        if resume_from is not None:  # under the lock: the logs of a resumed run are touched here
            start = read_steps_of(resume_from) or 0
            segment = begin_segment(run_dir, start, os.path.getmtime(resume_from), out)
        return _train_locked(config, run_dir, resume_from, segment, stop, out)


def _note(note: str | None, out: Print) -> None:
    if note:
        out(note)


def _train_locked(
    config: dict[str, Any], run_dir: str, resume_from: str | None, segment: int, stop: StopRequest, out: Print
) -> dict[str, Any]:
    from retro_atari_kit.models.threads import learner_threads

    seed = segment_seed(config["seed"], segment)  # fresh env randomness after a resume, same config
    # `parallel_play` in the preset -> envs in a play process (integrations/sb3/parallel_play)
    from retro_atari_kit.integrations.sb3.parallel_play import (
        PlayerDiedError,
        active_play_options,
        play_class_and_env,
    )

    play, monitor = active_play_options(config, out), monitor_dir(run_dir, segment)  # None: synchronous
    # the kit's one thread rule: the env workers (or the play process) keep their cores
    learner_threads(1 if play else int(config["n_envs"]))
    cls, venv = (
        play_class_and_env(algo_class(config["algo"]), play, config, monitor, seed)
        if play
        else (algo_class(config["algo"]), make_train_env(config, monitor, seed=seed))
    )
    try:
        model = _build_model(config, run_dir, venv, resume_from, out, cls)
        stop.raise_if_requested("interrupted before training started")
        model.set_logger(make_logger(run_dir, segment))
        out(precision_of(model))
        remaining = config["timesteps"] - int(model.num_timesteps)
        log_interval = {"ppo": 1, "a2c": 100}.get(config["algo"], 4)
        callbacks = training_callbacks(config, run_dir, stop)
        try:
            if remaining > 0:
                model.learn(
                    total_timesteps=remaining,
                    callback=callbacks,
                    reset_num_timesteps=False,
                    log_interval=log_interval,
                )
        except PlayerDiedError as exc:  # dead play process -> checkpoint, then one line naming it
            for callback in callbacks:
                callback.on_training_end()  # closes the progress bar, so the error is a line of its own
            path = save_checkpoint(model, run_dir, True)
            raise RunError(
                f"{exc}; checkpoint {path}; resume with: retrokit train --resume {run_dir}"
            ) from None
        finally:
            model.logger.close()  # flush log.txt / progress csv / tensorboard before merging
        steps = int(model.num_timesteps)
        if stop.requested:  # the signal handler stays ours until the save is done: a second one waits
            path = save_checkpoint(
                model, run_dir, config["save_replay_buffer"] or config["algo"] in OFF_POLICY
            )
            _note(merge_progress(run_dir), out)
            for line in stopped_lines(run_dir, steps, path):
                out(line)
            return {"steps": steps, "interrupted": True, "model": path}
        final = save_final(model, run_dir, config["save_replay_buffer"])
        _note(merge_progress(run_dir), out)
        games = model.ep_info_buffer
        score = f"{np.mean([e['r'] for e in games]):.2f} over the last {len(games)} games" if games else "n/a"
        out(f"done: {steps} steps, recent true score {score}")
        out(
            f"results in {run_dir}: model.zip, config.yaml, checkpoints/, monitor/, progress.csv, log.txt, "
            "tensorboard events"
        )
        for line in finished_lines(run_dir):
            out(line)
        return {"steps": steps, "interrupted": False, "model": final}
    finally:
        venv.close()
