"""Resolving a training request into the run's config, and validating it before anything is written.

SB3's checks of user input: the algorithm, its hyperparameters and their types, a throw-away model built on
the run layer's one env, and SB3's fields of an edited ``config.yaml``. A bad ``--set`` value is one clear
RunError and no run dir is created; the settings every engine shares are checked by the run layer.
"""

from __future__ import annotations

import os
import sys
import types
import typing
import warnings
from typing import Any

import gymnasium as gym
from retro_atari_kit.integrations.sb3.algorithms import (
    OFF_POLICY,
    algo_class,
    constructor_params,
    fast_learner_options,
)
from retro_atari_kit.integrations.sb3.presets import FAST_LEARNER_SCHEDULE_KEYS, allowed_keys, to_sb3_kwargs

from retro_atari_kit.presets import PresetError, apply_overrides, get_preset, zoo_hyperparams
from retro_atari_kit.runs import RunError, TrainSpec, check_config_fields, config_field_error, new_config
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK

# Keys of rl-zoo3 configs that mean "add a wrapper": the kit's env already is the whole stack.
WRAPPER_KEYS = {
    "env_wrapper": "the kit's env already is the DeepMind stack; use --env-kwarg to change it",
    "normalize": "frames are uint8 and normalised once in the model; rewards are clipped by the env",
}


def resolve_config(spec: TrainSpec) -> dict[str, Any]:
    """Preset + ``--set`` overrides + CLI settings -> the full configuration written to config.yaml.

    Checks what is SB3's (the algorithm, its preset and hyperparameters); the settings every engine shares
    (env ID, network, device, counts, backend) are the run layer's (``runs.startup.prepare_new_run``)."""
    algo = spec.algo.lower()
    algo_class(algo)
    preset = get_preset(algo, spec.preset)
    allowed = allowed_keys(algo, preset) | {"frame_stack", "env_kwargs"}
    for key, why in WRAPPER_KEYS.items():
        if key in spec.overrides:
            raise RunError(f"--set {key}=...: not used by the kit ({why})")
    try:
        hp = apply_overrides(preset, spec.overrides, allowed=allowed)
    except PresetError as exc:
        raise RunError(f"{exc} for {algo} (see docs/cli.md)") from None
    check_value_types(algo, hp)
    if hp.get("parallel_play"):  # env play in its own process (integrations/sb3/parallel_play)
        from retro_atari_kit.integrations.sb3.parallel_play import check_parallel_play

        try:
            check_parallel_play(algo, hp["parallel_play"])
        except ValueError as exc:
            raise RunError(str(exc)) from None
    try:  # the kit's own learner (integrations/sb3/fast_ppo.py)
        fast_learner_options(algo, hp.get("fast_learner"))
    except ValueError as exc:
        raise RunError(str(exc)) from None
    env_kwargs = {**hp.pop("env_kwargs", {}), **spec.env_kwargs}
    frame_stack = hp.pop("frame_stack", None)
    # frame stacking is an env kwarg of the kit's stack, not a wrapper
    if frame_stack not in (None, DEFAULT_FRAME_STACK):
        env_kwargs.setdefault("frame_stack", frame_stack)
    preset_n_envs = hp.pop("n_envs", None)
    hp.pop("n_timesteps", None)
    n_envs = spec.n_envs or os.cpu_count() or 1  # one env per CPU
    if (
        not spec.n_envs
        and preset_n_envs
        and (
            algo in OFF_POLICY
            or hp.get("parallel_play")
            or hp.get("fast_learner")
            or preset_n_envs != zoo_hyperparams(algo).get("n_envs")
        )
    ):
        # off-policy: n_envs sets the updates per env step (train_freq counts vector steps); a preset that
        # sets envs of its own (the GPU recipe, the sticky-action one) was tuned at its shape (minibatches
        # per rollout): the preset's envs, not one per CPU
        n_envs = preset_n_envs
    return new_config(
        "sb3",
        spec.command,
        algo=algo,
        env_id=spec.env_id,
        network=spec.network,
        preset=spec.preset,
        timesteps=int(spec.timesteps),
        n_envs=int(n_envs),
        seed=int(spec.seed),
        device=spec.device,
        backend=spec.backend,
        env_kwargs=env_kwargs,
        preset_n_envs=preset_n_envs,
        hyperparams=hp,
        eval_every=int(spec.eval_every),
        eval_episodes=int(spec.eval_episodes),
        checkpoint_every=int(spec.checkpoint_every),
        save_replay_buffer=bool(spec.save_replay_buffer),
    )


def _expected(annotation: Any) -> tuple[set[type], bool] | None:
    """(plain types a value may have, whether None is allowed) for simple annotations, else None."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else (annotation,)
    plain: set[type] = set()
    optional = False
    for arg in args:
        if arg is type(None):
            optional = True
        elif arg in (int, float, bool, str):
            plain.add(arg)
        else:
            return None  # schedules, classes, dicts: checked by building the model
    return (plain, optional) if plain else None


def _annotation(function: Any, param: Any) -> Any:
    """The parameter's annotation as an object (SB3 writes some as strings); None if it cannot be read."""
    annotation = param.annotation
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, vars(sys.modules[function.__module__]))  # noqa: S307 - SB3's own source
        except Exception:  # noqa: BLE001 - names only imported for type checkers
            return None
    return annotation


def check_value_types(algo: str, hp: dict[str, Any]) -> None:
    """RunError naming the key and the expected type when a value cannot be what SB3's signature says.

    SB3 does not check types at construction; a string ``gamma`` would crash after the first rollout.
    """
    init = algo_class(algo).__init__
    for key, param in constructor_params(algo).items():
        if key not in hp:
            continue
        expected = _expected(_annotation(init, param))
        if expected is None:
            continue
        allowed, optional = expected
        value = hp[key]
        if value is None and optional:
            continue
        if key in FAST_LEARNER_SCHEDULE_KEYS and isinstance(value, (str, dict)):
            continue  # a schedule: to_sb3_kwargs reads it (the kit's fast learners follow one)
        ok = (
            (bool in allowed and isinstance(value, bool))
            or (int in allowed and isinstance(value, int) and not isinstance(value, bool))
            or (float in allowed and isinstance(value, (int, float)) and not isinstance(value, bool))
            or (str in allowed and isinstance(value, str))
        )
        if not ok:
            names = " or ".join(sorted(t.__name__ for t in allowed)) + (" or null" if optional else "")
            raise RunError(f"--set {key}={value!r}: {algo} needs {names} for {key!r}")


def algo_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """SB3 constructor kwargs of a resolved config: schedules and classes resolved, the kit's extractor."""
    try:
        return to_sb3_kwargs(config["hyperparams"], network=config["network"])
    except ValueError as exc:
        raise RunError(f"--set {exc}") from None


def check_model_builds(config: dict[str, Any], env: gym.Env) -> None:
    """Build the SB3 model once on ``env`` (the run layer's one env of the config; left open), so a bad
    ``--set`` value (a wrong shape, an option the algorithm rejects) is one clear RunError before any file of
    the run is written."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    kwargs = algo_kwargs(config)
    policy = kwargs.pop("policy")
    if "buffer_size" in kwargs:
        kwargs["buffer_size"] = min(int(kwargs["buffer_size"]), 1_000)  # the probe needs no real replay
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. PPO's batch-size note for one env
            algo_class(config["algo"])(policy, DummyVecEnv([lambda: env]), device="cpu", verbose=0, **kwargs)
    except (TypeError, ValueError, KeyError, AssertionError, RuntimeError) as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise RunError(
            f"cannot build {config['algo']} with these hyperparameters: {msg}; check the --set values "
            "(see docs/cli.md)"
        ) from exc


# SB3's own integer fields of a run's config.yaml, with their least allowed value (the run layer checks the
# common ones: runs.resume.INT_FIELDS)
_INT_FIELDS = {"n_envs": 1, "eval_every": 0, "eval_episodes": 1}


def check_resumed_config(config: dict[str, Any], path: str) -> None:
    """RunError naming the field when SB3's own fields of a run's ``config.yaml`` (``path``; edited by hand,
    or from another version) cannot be resumed: a missing field, a wrong type, an unknown algo or
    hyperparameter. The run layer checks the common fields (``runs.resume.check_common_config``)."""

    def bad(field: str, why: str) -> RunError:
        return config_field_error(path, field, why)

    required = ("device", "env_kwargs", "hyperparams")
    check_config_fields(config, path, required, _INT_FIELDS)
    for field in ("env_kwargs", "hyperparams"):
        if not isinstance(config[field], dict):
            raise bad(field, f"{type(config[field]).__name__} instead of a mapping")
    if not isinstance(config.get("save_replay_buffer", False), bool):
        raise bad("save_replay_buffer", f"{config['save_replay_buffer']!r} is not true or false")
    try:
        algo_class(config["algo"])
    except RunError as exc:
        raise bad("algo", str(exc)) from None
    algo = str(config["algo"]).lower()
    allowed = allowed_keys(algo, {})
    for key in config["hyperparams"]:
        if key not in allowed:
            raise bad(f"hyperparams.{key}", f"not a hyperparameter of {algo}")
    try:
        check_value_types(algo, config["hyperparams"])
        algo_kwargs(config)
    except RunError as exc:
        raise bad("hyperparams", str(exc).removeprefix("--set ")) from None
