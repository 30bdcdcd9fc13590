"""SB3 callbacks of a ``retrokit train`` run: stop on a signal, checkpoints, progress bar, evaluations."""

from __future__ import annotations

import csv
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from retro_atari_kit.integrations.sb3.training.models import save_checkpoint
from stable_baselines3.common.callbacks import BaseCallback

from retro_atari_kit.csv_cells import csv_row
from retro_atari_kit.evaluation import EvaluationStopped, evaluate_model
from retro_atari_kit.models.threads import PhaseThreads
from retro_atari_kit.runs import StopRequest


class StopOnSignal(BaseCallback):
    """Ends ``learn`` at the next env step once a stop was requested, so the run can save and exit cleanly."""

    def __init__(self, stop: StopRequest) -> None:
        super().__init__()
        self.stop = stop

    def _on_step(self) -> bool:
        return not self.stop.requested


class ThreadsByPhase(BaseCallback):
    """torch's thread count by phase (the kit's rule, ``retro_atari_kit.models.threads``): fewer threads
    while the env workers step (rollout), every free core while the model learns (update), the count from
    before training restored at the end. DQN with one env gets the same count in both phases.

    The machine's load is measured once, at the start of training, while the run is idle (``measure=False``
    counts every usable core as free).
    """

    def __init__(
        self,
        workers: int,
        synchronous: bool = True,
        say: Callable[[str], None] | None = None,
        measure: bool = True,
    ) -> None:
        super().__init__()
        self.workers, self.synchronous, self.say, self.measure = workers, synchronous, say, measure
        self.threads: Any = None

    def _on_training_start(self) -> None:
        self.threads = PhaseThreads(self.workers, synchronous=self.synchronous, measure=self.measure)
        if self.say is not None:
            self.say(self.threads.describe())
        self.threads.acting()

    def _on_rollout_start(self) -> None:
        self.threads.acting()

    def _on_rollout_end(self) -> None:
        self.threads.learning()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        if self.threads is not None:
            self.threads.restore()


def _next_multiple(steps: int, every: int) -> int:
    return (steps // every + 1) * every


class Checkpoint(BaseCallback):
    """Saves ``checkpoints/model_<steps>_steps.zip`` atomically every ``every`` agent steps."""

    def __init__(self, run_dir: str, every: int, save_replay: bool) -> None:
        super().__init__()
        self.run_dir, self.every, self.save_replay = run_dir, every, save_replay
        self.next_at = 0

    def _on_training_start(self) -> None:
        self.next_at = _next_multiple(self.num_timesteps, self.every)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_at:
            save_checkpoint(self.model, self.run_dir, self.save_replay)
            self.next_at = _next_multiple(self.num_timesteps, self.every)
        return True


class Progress(BaseCallback):
    """tqdm bar: agent steps, steps/s, mean true score of the last 100 finished games."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.bar: Any = None
        self.t0 = 0.0
        self.s0 = 0
        self.last = 0

    def _on_training_start(self) -> None:
        from tqdm import tqdm

        tty = sys.stderr.isatty()
        self.bar = tqdm(
            total=self.total,
            initial=self.num_timesteps,
            unit="step",
            dynamic_ncols=True,
            mininterval=0.5 if tty else 30.0,
            file=sys.stderr,
            smoothing=0.05,
        )
        self.t0, self.s0, self.last = time.perf_counter(), self.num_timesteps, self.num_timesteps

    def _on_step(self) -> bool:
        self.bar.update(self.num_timesteps - self.last)
        self.last = self.num_timesteps
        if self.n_calls % 50 == 0:
            self._postfix(refresh=False)
        return True

    def _postfix(self, refresh: bool) -> None:
        games = self.model.ep_info_buffer
        score = f"{np.mean([e['r'] for e in games]):.1f}" if games else "n/a"
        sps = (self.num_timesteps - self.s0) / max(1e-9, time.perf_counter() - self.t0)
        self.bar.set_postfix_str(
            f"{sps:.0f} steps/s, score(100) {score}, games {len(games)}", refresh=refresh
        )

    def _on_rollout_end(self) -> None:
        # SB3 calls on_step before it adds that step's finished games to ep_info_buffer: at a step the
        # buffer lacks the games ending there, at the end of a rollout it holds them all
        if self.bar is not None:
            self._postfix(refresh=False)

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self._postfix(refresh=True)  # the last figures, the same the run's summary line prints
            self.bar.close()


def _say(line: str) -> None:
    """One line on stdout, above the progress bar (tqdm redraws it), flushed so a reader sees it now."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stdout)
    sys.stdout.flush()


class PeriodicEval(BaseCallback):
    """Every ``every`` steps: ``episodes`` whole games, true scores logged and appended to evaluations.csv.

    A stop request during an evaluation ends it at the next env step (whole games can take minutes): the
    part played is discarded, not logged, and ``learn`` ends so the run saves its stop checkpoint of the
    model as it was when the evaluation began. A resumed run evaluates next at the next multiple of
    ``every`` past its checkpoint.
    """

    def __init__(
        self,
        config: dict[str, Any],
        run_dir: str,
        every: int,
        episodes: int,
        stop: StopRequest | None = None,
        say: Callable[[str], None] = _say,
    ) -> None:
        super().__init__()
        self.config, self.run_dir, self.every, self.episodes = config, run_dir, every, episodes
        self.stop, self.say = stop or StopRequest(), say
        self.next_at = 0

    def _on_training_start(self) -> None:
        self.next_at = _next_multiple(self.num_timesteps, self.every)

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_at:
            return True
        if self.stop.requested:  # training ends at this step (StopOnSignal): no evaluation to start
            return False

        steps = self.num_timesteps
        self.say(f"evaluating {self.episodes} games at {steps} steps ...")
        try:
            scores = evaluate_model(
                self.model,
                self.config["env_id"],
                self.config["env_kwargs"],
                episodes=self.episodes,
                seed=self.config["seed"] + 10_000,
                deterministic=False,
                should_stop=lambda: self.stop.requested,
            )
        except EvaluationStopped as exc:
            played = f"{len(exc.scores)} of {self.episodes} games"
            self.say(f"evaluation at {steps} steps stopped after {played}; not logged")
            return False
        self.logger.record("eval/mean_score", float(np.mean(scores)))
        self.logger.record("eval/std_score", float(np.std(scores)))
        path = os.path.join(self.run_dir, "evaluations.csv")
        new = not os.path.exists(path)
        with open(path, "a", newline="") as fh:
            writer = csv.writer(fh)
            if new:
                writer.writerow(csv_row(["steps", "mean", "std", "min", "max", "episodes"]))
            row = [steps, np.mean(scores), np.std(scores), np.min(scores), np.max(scores), len(scores)]
            writer.writerow(csv_row(row))
        self.say(
            f"evaluation at {steps} steps: mean true score {np.mean(scores):.2f} over {len(scores)} games"
        )
        self.next_at = _next_multiple(self.num_timesteps, self.every)
        return True


def training_callbacks(
    config: dict[str, Any], run_dir: str, stop: StopRequest, threads: BaseCallback | None = None
) -> list[BaseCallback]:
    """The callbacks a run uses, by its config (checkpoints / evaluations only when enabled); ``threads``
    (a :class:`ThreadsByPhase`) first, so the thread count is set before any other callback runs."""
    callbacks: list[BaseCallback] = [] if threads is None else [threads]
    callbacks += [StopOnSignal(stop), Progress(config["timesteps"])]
    if config["checkpoint_every"]:
        callbacks.append(Checkpoint(run_dir, config["checkpoint_every"], config["save_replay_buffer"]))
    if config["eval_every"]:
        callbacks.append(PeriodicEval(config, run_dir, config["eval_every"], config["eval_episodes"], stop))
    return callbacks
