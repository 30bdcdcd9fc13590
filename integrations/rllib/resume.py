"""RLlib's part of the run layer's resume check (``retro_atari_kit.runs.resume``): its own fields of an
(edited) ``config.yaml`` (its settings get the checks of a new run's, :mod:`.checks`), what a checkpoint's
``policy.pt`` holds, and that it holds the config's network. The run layer checks the common fields, the
algorithm and the env's spaces.

Nothing here starts Ray; reading ``policy.pt`` needs torch only. :func:`restore` loads RLlib's state into a
built algorithm (Ray running).
"""

from __future__ import annotations

import os
from typing import Any

from retro_atari_kit.integrations.rllib.hyperparams import ALGOS
from retro_atari_kit.integrations.rllib.policy import POLICY_FILE, read_policy_file

from retro_atari_kit.runs import RunError, check_config_fields, config_field_error
from retro_atari_kit.runs.layout import config_text

__all__ = [
    "check_checkpoint_network",
    "check_resumed_config",
    "checkpoint_payload",
    "restore",
]


def check_resumed_config(config: dict[str, Any], path: str) -> dict[str, Any]:
    """RunError naming the field of ``config`` (read from ``path``) that cannot be resumed, of RLlib's own
    (the run layer has checked the common ones); returns the ``model_config`` of the module the config
    builds (network, encoder kwargs, DQN's dueling)."""
    from retro_atari_kit.integrations.rllib.checks import check_settings, quiet_rllib

    def bad(field: str, why: str) -> RunError:
        return config_field_error(path, field, why)

    check_config_fields(config, path, ("hyperparameters",), {})
    if config["algo"] not in ALGOS:
        raise bad(
            "algo", f"unknown algo {config['algo']!r} for --engine rllib; choose one of {', '.join(ALGOS)}"
        )
    for field in ("hyperparameters", "env_kwargs", "rllib"):
        if config.get(field) is not None and not isinstance(config[field], dict):
            raise bad(field, f"{type(config[field]).__name__} instead of a mapping")
    try:  # a new run's checks, without Ray running: unknown keys and bad values fail here
        rl_config = check_settings(
            config["algo"],
            config["env_id"],
            config["network"],
            config["hyperparameters"],
            config.get("env_kwargs") or {},
            config.get("rllib") or {},
            config.get("device", "auto"),
        )
    except (RunError, TypeError, ValueError) as exc:
        raise bad(
            "hyperparameters", str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
        ) from None
    with quiet_rllib():  # RLlib's default module spec, merged in here, imports (and warns about) modules
        return dict(rl_config.rl_module_spec.model_config or {})


def checkpoint_payload(checkpoint: str) -> dict[str, Any]:
    """``checkpoint``'s ``policy.pt`` (algo, observation shape, actions, weights); RunError if unreadable."""
    policy = os.path.join(checkpoint, POLICY_FILE)
    advice = f"delete {checkpoint} to resume from the previous one"
    payload = read_policy_file(policy, advice=advice, what="checkpoint ")
    for field, read in (("algo", str), ("obs_shape", tuple), ("n_actions", int)):
        try:
            read(payload[field])
        except Exception:  # noqa: BLE001 - missing or of the wrong kind: not the kit's payload
            raise RunError(
                f"cannot read checkpoint {policy}: its payload lacks a readable '{field}'; {advice}"
            ) from None
    return payload


def check_checkpoint_network(checkpoint: str, payload: dict[str, Any], model_config: dict[str, Any]) -> None:
    """RunError unless ``checkpoint`` holds the module ``model_config`` describes (config.yaml's network,
    ``encoder_kwargs`` and, for DQN, ``dueling``): RLlib would fail to load its weights only after Ray
    started, with a page of tensor shapes."""
    q_learning = bool(model_config.get("q_learning"))
    wanted = {
        "network": (model_config.get("network", "nature"), "network"),
        "encoder_kwargs": (dict(model_config.get("encoder_kwargs") or {}), "hyperparameters.encoder_kwargs"),
        "dueling": (q_learning and bool(model_config.get("dueling")), "hyperparameters.dueling"),
    }
    held = {"network": "nature", "encoder_kwargs": {}, "dueling": False}  # what older payloads imply
    for key, (want, field) in wanted.items():
        have = payload.get(key, held[key])
        if have != want:
            want_text, have_text = config_text(want), config_text(have)
            raise RunError(
                f"config.yaml says {field} {want_text} but {checkpoint} holds a module with {key} "
                f"{have_text}; put {field}: {have_text} back in config.yaml (start a new run for another "
                "network)"
            )


def restore(algo: Any, checkpoint: str) -> None:
    """RLlib's full state from ``checkpoint`` (an absolute path: RLlib reads it as a URI) into ``algo``;
    what RLlib cannot restore is one RunError line. Only a checkpoint this user's kit signed is restored:
    RLlib unpickles its state files (``runs.signatures``)."""
    from retro_atari_kit.runs.signatures import check_signed

    check_signed(checkpoint)
    try:
        algo.restore_from_path(checkpoint)
    except Exception as exc:  # noqa: BLE001  (a damaged or foreign RLlib state: one line)
        text = (str(exc).strip().splitlines() or [""])[0]
        raise RunError(
            f"RLlib cannot restore {checkpoint} ({type(exc).__name__}: {text}); if it is damaged, move it "
            "out of checkpoints/ to resume from the previous one"
        ) from None
