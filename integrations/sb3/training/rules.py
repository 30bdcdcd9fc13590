"""The SB3 engine's part of the run layer's checks (``retro_atari_kit.runs.engine.EngineRules``).

The run layer runs every check of a new run and of a resume once, for every engine, and builds the env once
(``runs.startup.prepare_new_run``, ``runs.resume.prepare_resume``); this module adds what only SB3 knows:
its config, that the model builds on that env and fits in memory, what an SB3 zip holds, and whether an
edited ``config.yaml`` can continue that zip. Every hyperparameter of an edited ``config.yaml`` is honoured
on resume (``load_hyperparams``) except the policy's construction, which the checkpoint's weights fix: a
change there is refused before anything is written.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import yaml
from retro_atari_kit.integrations.sb3.algorithms import OFF_POLICY, constructor_params
from retro_atari_kit.integrations.sb3.presets import EXTRACTORS
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
from retro_atari_kit.integrations.sb3.training.models import checkpoint_algo, checkpoint_data
from retro_atari_kit.integrations.sb3.training.safe_load import check_resume_load

from retro_atari_kit.runs import RunError, TrainSpec, list_checkpoints
from retro_atari_kit.runs.engine import EngineRules, SavedPolicy
from retro_atari_kit.runs.layout import config_text
from retro_atari_kit.runs.untrusted import UntrustedFileError, read_json_member

__all__ = ["RULES", "budget_warning", "describe", "load_hyperparams"]


def describe(config: dict[str, Any], run_dir: str) -> list[str]:
    """The resolved configuration as printed before training (a new run and a resume)."""
    return [f"run dir: {run_dir}\n{yaml.safe_dump(config, sort_keys=False).rstrip()}"]


def _resolve(spec: TrainSpec) -> dict[str, Any]:
    config = resolve_config(spec)
    if config["save_replay_buffer"] and config["algo"] not in OFF_POLICY:  # it would be silently ignored
        raise RunError(
            f"--save-replay-buffer: {config['algo']} has no replay buffer "
            f"({' and '.join(OFF_POLICY)} have one); drop it"
        )
    return config


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def budget_warning(config: dict[str, Any]) -> str | None:
    """One ``warning:`` line when ``--timesteps`` is too small for the algorithm as configured, else None.

    SB3 trains whatever budget it is given and says nothing: an off-policy run whose budget does not pass
    ``learning_starts`` only fills its replay buffer (no gradient step), an on-policy run shorter than one
    rollout (``n_steps`` x envs) collects the whole rollout anyway and makes a single update. Such a run is
    not refused (an SB3 user expects it to run, and tiny runs are how one tries a setup), but said so."""
    params = constructor_params(config["algo"])
    hyper = config.get("hyperparams") or {}

    def setting(name: str) -> int | None:
        value = hyper.get(name, params[name].default if name in params else None)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    steps, algo = int(config["timesteps"]), config["algo"]
    if algo in OFF_POLICY:
        starts = setting("learning_starts")
        if starts is not None and steps <= starts:
            return (
                f"warning: --timesteps {steps} is not more than {algo}'s learning_starts ({starts}): the run "
                f"only fills its replay buffer and learns nothing; pass --timesteps above {starts} or "
                f"--set learning_starts=N below {steps}"
            )
        return None
    n_steps, n_envs = setting("n_steps"), int(config["n_envs"])
    if n_steps is not None and steps < n_steps * n_envs:
        rollout = n_steps * n_envs
        return (
            f"warning: --timesteps {steps} is less than one {algo} rollout (n_steps {n_steps} x {n_envs} "
            f"envs = {rollout} steps): the run collects {rollout} steps and makes a single update; pass "
            f"--timesteps {rollout} or more (or fewer --n-envs / a smaller --set n_steps)"
        )
    return None


def _check_env(config: dict[str, Any], env: gym.Env, force: bool) -> list[str]:
    check_model_builds(config, env)
    est = estimate_memory(config, env.observation_space)
    lines = []
    if config.get("preset_n_envs") and config["preset_n_envs"] != config["n_envs"]:
        lines.append(
            f"note: preset {config['preset']!r} was tuned with n_envs={config['preset_n_envs']}; "
            f"using {config['n_envs']} (--n-envs {config['preset_n_envs']} to match)"
        )
    lines.append(check_memory(est, force))
    if config["device"].startswith("cuda") or (config["device"] == "auto" and _cuda_available()):
        lines.append(f"estimated VRAM ~{format_bytes(estimate_vram(est))}")
    warning = budget_warning(config)  # last: the line printed just before training starts
    return [*lines, warning] if warning else lines


def _read_checkpoint(path: str) -> SavedPolicy:
    try:  # a file refused as untrusted (a bomb) says why
        read_json_member(path)
    except UntrustedFileError as exc:
        raise RunError(f"{exc}; delete it to resume from the previous checkpoint") from None
    except Exception:  # noqa: BLE001 - other damage: the line below
        pass
    data = checkpoint_data(path)
    if data is None:
        raise RunError(f"cannot read checkpoint {path}; delete it to resume from the previous one")
    obs, act = data.get("observation_space") or {}, data.get("action_space") or {}
    return SavedPolicy(
        algo=checkpoint_algo(data),
        obs_shape=tuple(obs.get("_shape") or ()),
        obs_dtype=obs.get("dtype"),
        n_actions=int(act["n"]) if "n" in act else None,
    )


def _readable(value: Any) -> Any:
    """A value as SB3's ``data_to_json`` writes it beside a pickled one: JSON as is, anything else as str."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _stored_policy(path: str) -> dict[str, Any]:
    """The policy_kwargs an SB3 zip stores, as plain JSON: SB3 writes each item of a pickled dict beside it
    (a class as its ``str``); the pickle itself is never read."""
    data = checkpoint_data(path) or {}
    stored = data.get("policy_kwargs")
    if not isinstance(stored, dict):
        return {}
    kwargs = {k: v for k, v in stored.items() if not k.startswith(":")}
    kwargs.pop("device", None)  # SB3's load drops it too
    return kwargs


def _check_checkpoint(path: str, config: dict[str, Any], checked: Any) -> None:
    """RunError when config.yaml's ``hyperparams.policy`` / ``policy_kwargs`` would build another network
    than the one whose weights ``path`` holds (SB3 would fail mid-load, after the run dir was touched)."""
    kwargs = algo_kwargs(config)
    stored_kwargs = _stored_policy(path)
    wanted = {k: _readable(v) for k, v in (kwargs.get("policy_kwargs") or {}).items()}
    extractor = stored_kwargs.get("features_extractor_class")
    held = next(
        (n for n, cls in EXTRACTORS.items() if isinstance(extractor, str) and f"'{cls}'" in extractor), None
    )
    if held is not None and held != config["network"]:
        raise RunError(
            f"config.yaml says network {config['network']!r} but {path} holds a {held} CNN; put network: "
            f"{held} back in config.yaml (start a new run for another network)"
        )
    for key in sorted(set(wanted) | set(stored_kwargs)):
        if wanted.get(key) != stored_kwargs.get(key):
            want, built = config_text(wanted.get(key)), config_text(stored_kwargs.get(key))
            raise RunError(
                f"config.yaml: hyperparams.policy_kwargs.{key} is {want} but {path} was built with {built}; "
                "put that back in config.yaml (the network's construction cannot change on resume; start a "
                "new run for another one)"
            )


def load_hyperparams(config: dict[str, Any]) -> dict[str, Any]:
    """What ``Algorithm.load`` gets on resume, so that config.yaml's hyperparameters win over those stored
    in the checkpoint (an edit is honoured): every constructor argument but the policy's construction,
    which :func:`_check_checkpoint` has found equal."""
    kwargs = algo_kwargs(config)
    for key in ("policy", "policy_kwargs"):
        kwargs.pop(key, None)
    return kwargs


RULES = EngineRules(
    name="sb3",
    resolve=_resolve,
    check_env=_check_env,
    checkpoints=list_checkpoints,
    read_checkpoint=_read_checkpoint,
    check_config=check_resumed_config,
    check_checkpoint=_check_checkpoint,
    describe=describe,
    local_vector_env=True,  # the n_envs envs run in one vector env of the training process
    check_load=check_resume_load,  # the weights and replay buffer train loads, loaded once before any write
)
