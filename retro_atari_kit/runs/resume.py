"""The one resume check of every engine: ``retrokit train --resume RUN_DIR`` is :func:`prepare_resume`.

Everything is checked before anything of the run dir is written or removed: the run is the kit's and not
being trained, every field of its ``config.yaml`` (it may have been edited by hand), the env that config
makes (built once), that the newest complete checkpoint was written by the config's algorithm for that
env (and, per engine, with that network), that every checkpoint can be read at all (permissions), and the
engine's trial load of all that ``train`` will load (weights, a replay buffer). Only then are the leftovers of
writes cut short removed and a new ``--timesteps`` total recorded: a refused resume changes nothing. A run
killed before its first checkpoint resumes from its start (its logs set aside), so no run is left that
neither a new command nor ``--resume`` accepts. The engine is the one the run's config names; it adds its
part through its ``RULES`` (:class:`~retro_atari_kit.runs.engine.EngineRules`), found in
``runs.engine.ENGINE_REGISTRY``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from retro_atari_kit.errors import RunError
from retro_atari_kit.files import read_error_message
from retro_atari_kit.models import check_network
from retro_atari_kit.protocols import get_protocol
from retro_atari_kit.registration import check_env_id, open_env
from retro_atari_kit.runs.checkpoints import (
    CHECKPOINT_DIR,
    discard_unfinished_writes,
    final_model_path,
    list_checkpoints,
    unfinished_writes,
)
from retro_atari_kit.runs.engine import SavedPolicy, engine_rules
from retro_atari_kit.runs.layout import (
    CONFIG_FILE,
    check_config_fields,
    check_total_timesteps,
    config_backend,
    config_field_error,
    open_for_resume,
    single_env_kwargs,
    write_config,
)
from retro_atari_kit.runs.progress import set_aside_unsaved_start
from retro_atari_kit.runs.startup import check_backend, check_device

Print = Callable[[str], None]

# fields every engine's config.yaml has, the integer ones with their least allowed value (None: any)
REQUIRED_FIELDS = ("algo", "env_id", "network")
INT_FIELDS: dict[str, int | None] = {"timesteps": 1, "seed": None, "checkpoint_every": 0}

__all__ = ["INT_FIELDS", "REQUIRED_FIELDS", "check_common_config", "check_saved_policy", "prepare_resume"]


def check_common_config(config: dict[str, Any], path: str) -> None:
    """RunError naming the first field of ``config`` (read from ``path``) that no engine can resume: a missing
    or mistyped common field, an unknown env ID, network, device or protocol, ``env_kwargs`` that are not a
    mapping.
    The engine checks its own fields after this; the vector backend is checked with the env it runs."""
    check_config_fields(config, path, REQUIRED_FIELDS, INT_FIELDS)
    if not isinstance(config.get("env_kwargs", {}), dict):
        raise config_field_error(
            path, "env_kwargs", f"{type(config['env_kwargs']).__name__} instead of a mapping"
        )

    checks = (
        ("env_id", lambda: check_env_id(str(config["env_id"]))),
        ("network", lambda: check_network(config["network"])),
        ("device", lambda: check_device(str(config.get("device", "auto")))),
        ("protocol", lambda: get_protocol(str(config.get("protocol", "training")))),
    )
    for field, check in checks:
        try:
            check()
        except RunError as exc:
            raise config_field_error(path, field, str(exc)) from None


def check_saved_policy(checkpoint: str, saved: SavedPolicy, obs_space: Any, action_space: Any) -> None:
    """RunError unless ``checkpoint`` was trained on the observations and actions of the config's env."""
    shape, dtype = tuple(obs_space.shape), str(obs_space.dtype)
    held = f"{tuple(saved.obs_shape)}" + (f" {saved.obs_dtype}" if saved.obs_dtype else "")
    if tuple(saved.obs_shape) != shape or (saved.obs_dtype and saved.obs_dtype != dtype):
        raise RunError(
            f"{checkpoint} was trained on observations {held}, but config.yaml's env makes {shape} {dtype}; "
            "restore env_id / env_kwargs in config.yaml"
        )
    actions = getattr(action_space, "n", None)
    if saved.n_actions is not None and saved.n_actions != actions:
        raise RunError(
            f"{checkpoint} was trained with {saved.n_actions} actions, but config.yaml's env has {actions}; "
            "restore env_id / env_kwargs in config.yaml"
        )


def _check_algo(checkpoint: str, saved: SavedPolicy, algo: Any) -> None:
    if saved.algo != algo:
        wrote = f"a {saved.algo} checkpoint" if saved.algo else "not a model of any algorithm here"
        fix = f"put algo: {saved.algo} back in config.yaml" if saved.algo else "start a new run"
        raise RunError(f"config.yaml says algo {algo!r} but {checkpoint} is {wrote}; {fix}")


def prepare_resume(
    run_dir: str, timesteps: int | None = None, out: Print = print
) -> tuple[dict[str, Any], str, str | None]:
    """Check a resume of ``run_dir`` by the engine that trained it; returns ``(config, run_dir, checkpoint)``.

    Call it holding the run's lock (``RunLock``), as the CLI does. ``timesteps`` is a new total (never below
    the checkpoint's steps) or None to keep the config's. Every check (and the engine's trial load of what
    ``train`` will load) comes before the first write, so a refused resume leaves every byte as it was.

    A run killed before its first checkpoint (nothing saved but its config) resumes from its start:
    ``checkpoint`` is None, and its logs are set aside (``progress.set_aside_unsaved_start``).
    """
    config = open_for_resume(run_dir)
    rules = engine_rules(config["engine"])
    leftovers = unfinished_writes(run_dir)  # removed only once every check below has passed
    cut = {path for path, _ in leftovers}
    named = [path for _, path in list_checkpoints(run_dir) if path not in cut]
    for path in named:  # "permission denied" said as such, not as a damaged or missing checkpoint
        _check_readable(path)
    checkpoints = [c for c in rules.checkpoints(run_dir) if c[1] not in cut]
    if not checkpoints and named:
        raise RunError(f"--resume {run_dir}: no checkpoint in {run_dir}/{CHECKPOINT_DIR}; start a new run")
    if not checkpoints:
        _refuse_a_start_over_a_final_model(run_dir)
    steps, checkpoint = checkpoints[-1] if checkpoints else (0, None)
    saved = rules.read_checkpoint(checkpoint) if checkpoint else None
    if saved is not None and "algo" in config:  # first: the rest of the config is checked against the algo
        _check_algo(checkpoint, saved, config["algo"])
    path = os.path.join(run_dir, CONFIG_FILE)
    check_common_config(config, path)
    checked = rules.check_config(config, path)
    env_kwargs = single_env_kwargs(config.get("env_kwargs"))
    env = open_env(config["env_id"], env_kwargs)
    try:
        spaces = env.observation_space, env.action_space
        if saved is not None:
            check_saved_policy(checkpoint, saved, *spaces)
        n_envs = config.get("n_envs") if rules.local_vector_env else None  # as a new run (runs.startup)
        _check_backend(config["env_id"], config_backend(config), env_kwargs, path, n_envs)
    finally:
        env.close()
    if checkpoint is not None:
        rules.check_checkpoint(checkpoint, config, checked)
        if rules.check_load is not None:
            rules.check_load(checkpoint, config, *spaces)
    new_total = check_total_timesteps(run_dir, config, timesteps, steps)
    # every check passed: only now is the run dir written
    for note in discard_unfinished_writes(run_dir, leftovers):
        out(note)
    if checkpoint is None:
        note = set_aside_unsaved_start(run_dir)
        if note:
            out(note)
    if new_total:
        config["timesteps"] = int(timesteps)  # type: ignore[arg-type]
        write_config(run_dir, config)
    for line in rules.describe(config, run_dir):
        out(line)
    if checkpoint is None:
        out(f"no checkpoint yet: starting {run_dir} again from step 0 with its config.yaml")
    else:
        out(f"resuming from {checkpoint} ({steps} steps)")
    return config, run_dir, checkpoint


def _check_readable(path: str) -> None:
    try:
        check_readable(path)
    except OSError as exc:
        raise RunError(read_error_message(exc)) from None


def check_readable(path: str) -> None:
    """OSError naming the first entry of ``path`` the kit cannot read: the file, or for a folder the folder
    and everything in it (listing it, opening each file). Asked before a file is used, so that "permission
    denied" is said as such, not as a missing or damaged file (zipfile, glob and yaml report it otherwise)."""
    if not os.path.isdir(path):
        _open_and_close(path)
        return
    for folder, _, files in os.walk(path, onerror=_raise):
        for name in files:
            _open_and_close(os.path.join(folder, name))


def _open_and_close(path: str) -> None:
    # non-blocking: a FIFO put where a file belongs must not hang the check
    os.close(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))


def _raise(exc: OSError) -> None:
    raise exc


def _refuse_a_start_over_a_final_model(run_dir: str) -> None:
    """RunError if a run with no checkpoint has a final model: starting it over would train past a saved
    model as if it were not there."""
    for suffix in (".zip", ""):
        final = final_model_path(run_dir, suffix)
        if os.path.lexists(final):
            raise RunError(
                f"--resume {run_dir}: no checkpoint in {run_dir}/{CHECKPOINT_DIR}, but the run has its final "
                f"model {final}; restore {CHECKPOINT_DIR}/ to continue it, or start a new run"
            )


def _check_backend(
    env_id: str, backend: str, env_kwargs: dict[str, Any], path: str, n_envs: int | None = None
) -> None:
    try:
        check_backend(env_id, backend, env_kwargs, n_envs)
    except RunError as exc:
        raise config_field_error(path, "backend", str(exc)) from None
