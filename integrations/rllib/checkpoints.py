"""The RLlib engine's model files: checkpoints (RLlib's full state plus ``policy.pt``), the run's step count,
the newest model and its export. Ray is imported only when a checkpoint is written or steps are read."""

from __future__ import annotations

import os
from typing import Any

from retro_atari_kit.integrations.rllib.policy import POLICY_FILE, policy_payload, read_policy_file

from retro_atari_kit.runs import (
    RunError,
    atomic_write,
    checkpoint_path,
    final_model_path,
    list_checkpoints,
    load_config,
)
from retro_atari_kit.runs.signatures import sign_checkpoint


def latest_model(run_dir: str) -> tuple[str, int | None]:
    """``(path, steps)`` of the run's final model, else its newest checkpoint (directories)."""
    load_config(run_dir)
    ckpts = [c for c in list_checkpoints(run_dir) if os.path.isfile(os.path.join(c[1], POLICY_FILE))]
    final = final_model_path(run_dir, suffix="")
    if os.path.isfile(os.path.join(final, POLICY_FILE)):
        # the final model is a copy of the last checkpoint (or an export without checkpoints): its own
        # policy.pt records the steps
        return final, int(read_policy_file(os.path.join(final, POLICY_FILE))["steps"])
    if not ckpts:
        raise RunError(f"{run_dir} has no checkpoint yet; train longer or resume it")
    return ckpts[-1][1], ckpts[-1][0]


def save_checkpoint(algo: Any, run_dir: str, steps: int, config: dict[str, Any], spaces: tuple) -> str:
    """Write ``checkpoints/model_<steps>_steps/`` atomically: RLlib's state plus ``policy.pt``."""
    import torch

    path = checkpoint_path(run_dir, steps, suffix="")
    module_spec = algo.config.rl_module_spec

    def write(tmp: str) -> None:
        algo.save_to_path(tmp)
        state = algo.learner_group.get_state(components="learner/rl_module/default_policy")
        weights = state["learner"]["rl_module"]["default_policy"]
        payload = policy_payload(
            weights,
            dict(module_spec.model_config or {}),
            spaces[0],
            spaces[1],
            config["algo"],
            config["env_id"],
            steps,
        )
        torch.save(payload, os.path.join(tmp, POLICY_FILE))
        sign_checkpoint(tmp)  # RLlib restores its state with pickle: only signed checkpoints are resumed

    atomic_write(path, write)
    return path


def env_steps(algo: Any) -> int:
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    return int(algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0) or 0)


def run_steps(previous: int, start: int, base: int, reading: int) -> int:
    """The run's env steps after an iteration: ``start`` (the resumed checkpoint's) plus what RLlib
    counted since ``base``, never below ``previous``. RLlib's lifetime counter is read with a default of
    0 (it is absent until a runner has reported), so a missing reading must not take the count back: the
    stop checkpoint is never named below steps that ``progress.csv`` already logged."""
    return max(previous, start + reading - base)


def export_model(run_dir: str, out_dir: str) -> tuple[str, int | None]:
    """Copy the run's final policy (else its newest checkpoint's) to ``out_dir/model/policy.pt``: the
    module's inference weights, torch only; RLlib's full algorithm state stays in the run's checkpoints."""
    import shutil

    path, steps = latest_model(run_dir)
    dst = os.path.join(final_model_path(out_dir, suffix=""), POLICY_FILE)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(os.path.join(path, POLICY_FILE), dst)
    return dst, steps
