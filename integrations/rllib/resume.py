"""What ``--resume`` of an RLlib run checks before anything is written: its ``config.yaml`` (it may have been
edited by hand) and that the newest checkpoint was written by the config's algorithm for the config's env.

Nothing here starts Ray; reading ``policy.pt`` needs torch only.
"""

from __future__ import annotations

import os
from typing import Any

from retro_atari_kit.integrations.rllib.hyperparams import ALGOS
from retro_atari_kit.integrations.rllib.policy import POLICY_FILE, read_policy_file

from retro_atari_kit.runs import RunError, check_config_fields, config_field_error

# integer fields of an RLlib run's config.yaml, with their least allowed value (None: any)
_INT_FIELDS = {"timesteps": 1, "seed": None, "checkpoint_every": 0}

__all__ = ["check_checkpoint_algo", "check_checkpoint_spaces", "check_resumed_config", "checkpoint_payload"]


def check_resumed_config(config: dict[str, Any], path: str) -> None:
    """RunError naming the field of ``config`` (read from ``path``) that cannot be resumed."""
    from retro_atari_kit.integrations.rllib.config import algo_config

    from retro_atari_kit.models import check_network
    from retro_atari_kit.registration import check_env_id

    def bad(field: str, why: str) -> RunError:
        return config_field_error(path, field, why)

    check_config_fields(config, path, ("algo", "env_id", "network", "hyperparameters"), _INT_FIELDS)
    if config["algo"] not in ALGOS:
        raise bad(
            "algo", f"unknown algo {config['algo']!r} for --engine rllib; choose one of {', '.join(ALGOS)}"
        )
    try:
        check_env_id(str(config["env_id"]))
    except RunError as exc:
        raise bad("env_id", str(exc)) from None
    try:
        check_network(config["network"])
    except RunError as exc:
        raise bad("network", str(exc)) from None
    for field in ("hyperparameters", "env_kwargs", "rllib"):
        if config.get(field) is not None and not isinstance(config[field], dict):
            raise bad(field, f"{type(config[field]).__name__} instead of a mapping")
    try:  # builds RLlib's config without Ray running: unknown keys and bad values fail here
        algo_config(
            config["algo"],
            config["env_id"],
            config["network"],
            **config["hyperparameters"],
            env_kwargs=config.get("env_kwargs") or {},
        )
    except (RunError, TypeError, ValueError) as exc:
        raise bad(
            "hyperparameters", str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
        ) from None


def checkpoint_payload(checkpoint: str) -> dict[str, Any]:
    """``checkpoint``'s ``policy.pt`` (algo, observation shape, actions, weights); RunError if unreadable."""
    policy = os.path.join(checkpoint, POLICY_FILE)
    try:
        payload = read_policy_file(policy)
        payload["algo"], tuple(payload["obs_shape"]), int(payload["n_actions"])
    except Exception as exc:  # noqa: BLE001 - any damage means "unreadable"
        raise RunError(
            f"cannot read checkpoint {policy} ({type(exc).__name__}); delete {checkpoint} to resume from "
            "the previous one"
        ) from None
    return payload


def check_checkpoint_algo(checkpoint: str, payload: dict[str, Any], algo: Any) -> None:
    """RunError unless ``checkpoint`` was written by ``algo`` (config.yaml's algorithm)."""
    if payload["algo"] != algo:
        raise RunError(
            f"config.yaml says algo {algo!r} but {checkpoint} is a {payload['algo']} checkpoint; "
            f"put algo: {payload['algo']} back in config.yaml"
        )


def check_checkpoint_spaces(
    checkpoint: str, payload: dict[str, Any], spaces: tuple[tuple[int, ...], int]
) -> None:
    """RunError unless ``checkpoint`` was trained on observations of shape ``spaces[0]`` with ``spaces[1]``
    actions (what the config's env makes)."""
    shape, actions = tuple(payload["obs_shape"]), int(payload["n_actions"])
    if shape != tuple(spaces[0]) or actions != int(spaces[1]):
        raise RunError(
            f"{checkpoint} was trained on observations {shape} with {actions} actions, but config.yaml's env "
            f"makes {tuple(spaces[0])} with {spaces[1]}; restore env_id / env_kwargs in config.yaml"
        )
