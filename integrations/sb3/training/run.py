"""A ``retrokit train`` run on SB3: train a new run or a resumed one.

The checks of a new run and of a resume, made before ``train`` is called, are the run layer's
(``runs.startup``, ``runs.resume``), SB3's part in :mod:`.rules`. The run directory (layout, config, lock,
checkpoints' names, monitor CSVs, progress merging) is the core's ``retro_atari_kit.runs``; this module adds
what is SB3's: the model, its logger and callbacks.
"""

from __future__ import annotations

import os
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from retro_atari_kit.integrations.sb3.algorithms import OFF_POLICY, learner_class
from retro_atari_kit.integrations.sb3.training.callbacks import ThreadsByPhase, training_callbacks
from retro_atari_kit.integrations.sb3.training.config import algo_kwargs
from retro_atari_kit.integrations.sb3.training.models import (
    REPLAY_FILE,
    load_model,
    read_steps_of,
    save_checkpoint,
    save_final,
)
from retro_atari_kit.integrations.sb3.training.rules import load_hyperparams
from retro_atari_kit.integrations.sb3.training.safe_load import load_replay

from retro_atari_kit.models.threads import learner_threads
from retro_atari_kit.processes import ChildDiedError
from retro_atari_kit.runs import (
    CHECKPOINT_DIR,
    RunError,
    StopRequest,
    begin_segment,
    merge_progress,
    monitor_dir,
    progress_path,
    recent_games,
    training_session,
)
from retro_atari_kit.runs.startup import finished_lines, segment_seed, stopped_lines

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


def _carry_on_recent_games(model: Any, run_dir: str) -> None:
    """The last games before the resume, from the monitor CSVs, as the window of ``ep_rew_mean`` and the
    progress bar's score (SB3 saves no such window; ``learn`` keeps one that is already there)."""
    window = model._stats_window_size
    _, games = recent_games(run_dir, window)
    model.ep_info_buffer = deque(({"r": r, "l": int(n), "t": t} for r, n, t in games), maxlen=window)
    model.ep_success_buffer = deque(maxlen=window)


def _build_model(
    config: dict[str, Any],
    run_dir: str,
    venv: Any,
    resume_from: str | None,
    out: Print,
    cls: type,
    extra: dict[str, Any] | None = None,
) -> Any:
    """The model to train: new, or loaded from ``resume_from``; ``extra``: constructor arguments of the
    kit's fast learner (``learner_class``)."""
    algo = config["algo"]
    if resume_from is None:
        kwargs = {**algo_kwargs(config), **(extra or {})}
        policy = kwargs.pop("policy")
        with warnings.catch_warnings():  # SB3's three-line warning, said in one line below
            warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
            model = cls(policy, venv, seed=config["seed"], device=config["device"], verbose=0, **kwargs)
        _note(_truncated_minibatch(model), out)
        return model
    # config.yaml's hyperparameters win over the checkpoint's: an edit made before --resume is honoured
    model = load_model(
        resume_from,
        env=venv,
        device=config["device"],
        algo=algo,
        cls=cls,
        overrides={**load_hyperparams(config), **(extra or {})},
    )
    _carry_on_recent_games(model, run_dir)
    if algo not in OFF_POLICY:
        return model
    replay = os.path.join(run_dir, CHECKPOINT_DIR, REPLAY_FILE)
    old_pickle = replay.removesuffix(".npz") + ".pkl"
    if os.path.exists(replay):
        load_replay(model.replay_buffer, replay)
        out(f"replay buffer restored from {replay}")
    elif os.path.exists(old_pickle):
        out(f"note: {old_pickle} not read (a pickle can run code); the buffer refills")
    else:  # e.g. a run copied without its buffer: the weights go on, the past is lost
        out(f"note: no replay buffer at {replay}; the buffer refills from empty")
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


def _cause(exc: ChildDiedError) -> str:
    """The died error's line naming the env and the cause, without the vector env's own advice ("make a new
    one"): the run says what to do instead."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__).removesuffix(
        "; the vector env is closed, make a new one"
    )


def _truncated_minibatch(model: Any) -> str | None:
    """One line where PPO's rollout is not a whole number of minibatches (SB3 warns in three)."""
    batch_size, n_steps = getattr(model, "batch_size", None), getattr(model, "n_steps", None)
    if not hasattr(model, "n_epochs") or not batch_size or not n_steps:
        return None
    rollout = n_steps * model.n_envs
    if rollout % batch_size == 0:
        return None
    return (
        f"note: a rollout of {rollout} samples ({n_steps} steps x {model.n_envs} envs) is not a multiple of "
        f"batch_size {batch_size}: each epoch ends with a minibatch of {rollout % batch_size}"
    )


def _gpu_note(model: Any) -> str | None:
    """One line where the kit's GPU learner trains on a device that is not CUDA."""
    from retro_atari_kit.integrations.sb3.fast_ppo import DeviceRollouts

    if not isinstance(model, DeviceRollouts) or model.device.type == "cuda":
        return None
    return (
        f"note: this preset's learner is built for a CUDA GPU (compiled steps, CUDA graphs); on "
        f"{model.device.type} it trains the same recipe without CUDA graphs"
    )


def _note(note: str | None, out: Print) -> None:
    if note:
        out(note)


def _train_locked(
    config: dict[str, Any], run_dir: str, resume_from: str | None, segment: int, stop: StopRequest, out: Print
) -> dict[str, Any]:
    seed = segment_seed(config["seed"], segment)  # fresh env randomness after a resume, same config
    # `parallel_play` in the preset -> envs in a play process (integrations/sb3/parallel_play)
    from retro_atari_kit.integrations.sb3.parallel_play import active_play_options, play_class_and_env

    play, monitor = active_play_options(config, out), monitor_dir(run_dir, segment)  # None: synchronous
    # the kit's one thread rule: the play process keeps its core; synchronous envs get theirs while they
    # step and give them back to the update (ThreadsByPhase, set per phase once training starts)
    threads = None if play else ThreadsByPhase(int(config["n_envs"]), synchronous=True, say=out)
    if play:
        learner_threads(1)
    # `fast_learner` in the preset -> the kit's learner (integrations/sb3/fast_ppo.py), a subclass of SB3's
    base, extra = learner_class(config["algo"], config["hyperparams"].get("fast_learner"))
    cls, venv = (
        play_class_and_env(base, play, config, monitor, seed)
        if play
        else (base, make_train_env(config, monitor, seed=seed))
    )
    try:
        model = _build_model(config, run_dir, venv, resume_from, out, cls, extra)
        stop.raise_if_requested("interrupted before training started")
        model.set_logger(make_logger(run_dir, segment))
        out(precision_of(model))
        _note(_gpu_note(model), out)
        remaining = config["timesteps"] - int(model.num_timesteps)
        log_interval = {"ppo": 1, "a2c": 100}.get(config["algo"], 4)
        callbacks = training_callbacks(config, run_dir, stop, threads)
        died: ChildDiedError | None = None
        try:
            if remaining > 0:
                model.learn(
                    total_timesteps=remaining,
                    callback=callbacks,
                    reset_num_timesteps=False,
                    log_interval=log_interval,
                )
        except ChildDiedError as exc:  # an env worker or the play process died: saved as a stop is, below
            for callback in callbacks:
                callback.on_training_end()  # closes the progress bar, so the error is a line of its own
            died = exc
        finally:
            model.logger.close()  # flush log.txt / progress csv / tensorboard before merging
        steps = int(model.num_timesteps)
        if stop.requested or died is not None:  # the handler stays ours until the save is done
            path = save_checkpoint(
                model, run_dir, config["save_replay_buffer"] or config["algo"] in OFF_POLICY
            )
            _note(merge_progress(run_dir), out)
            if died is not None:
                raise RunError(
                    f"{_cause(died)}; training stopped at {steps} steps, checkpoint {path}; resume with: "
                    f"retrokit train --resume {run_dir}"
                ) from None
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
