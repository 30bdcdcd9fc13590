"""SB3 model files of a run: atomic saves, checkpoints, and loading the right one with the right class."""

from __future__ import annotations

import inspect
import json
import os
import zipfile
from typing import Any

from retro_atari_kit.integrations.sb3.algorithms import algo_class, available_algos, constructor_params

from retro_atari_kit.runs import (
    RunError,
    atomic_write,
    checkpoint_path,
    final_model_path,
    find_run_dir,
    list_checkpoints,
    load_config,
    publish_final_model,
)

REPLAY_FILE = "replay_buffer.pkl"


def save_checkpoint(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """Save ``checkpoints/model_<steps>_steps.zip`` atomically (and the replay buffer if asked)."""
    path = checkpoint_path(run_dir, int(model.num_timesteps))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, model.save)
    if save_replay and getattr(model, "replay_buffer", None) is not None:
        atomic_write(os.path.join(os.path.dirname(path), REPLAY_FILE), model.save_replay_buffer)
    return path


def save_final(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """The last checkpoint, published as ``model.zip`` (an independent copy). Returns model.zip."""
    final = final_model_path(run_dir)
    publish_final_model(save_checkpoint(model, run_dir, save_replay), final)
    return final


def checkpoint_data(model_zip: str) -> dict[str, Any] | None:
    """The JSON ``data`` an SB3 zip stores (attributes, spaces, ``num_timesteps``), or None if unreadable."""
    try:
        with zipfile.ZipFile(model_zip) as zf:
            data = json.loads(zf.read("data"))
        int(data["num_timesteps"])
    except Exception:  # noqa: BLE001 - any damage means "unreadable"
        return None
    return data


def read_steps_of(model_zip: str) -> int | None:
    """``num_timesteps`` stored in an SB3 zip, or None if the file cannot be read as one."""
    data = checkpoint_data(model_zip)
    return None if data is None else int(data["num_timesteps"])


def _policy_class(data: dict[str, Any]) -> type | None:
    """The policy class a zip's ``data`` names (SB3 stores it cloudpickled, by reference), or None."""
    import base64

    import cloudpickle

    try:
        cls = cloudpickle.loads(base64.b64decode(data["policy_class"][":serialized:"].encode()))
    except Exception:  # noqa: BLE001 - a class that cannot be imported here tells nothing
        return None
    return cls if isinstance(cls, type) else None


def checkpoint_algo(data: dict[str, Any]) -> str | None:
    """The algorithm (``ppo``, ``a2c``, ``dqn``, ``qrdqn``) whose ``save`` wrote ``data``; None if none fits.

    Read from the zip without building a model: the policy class must derive from one of the algorithm's
    policies, and no stored attribute may be a constructor argument of another algorithm only. Of those
    that fit (A2C's attributes are a subset of PPO's), the one whose own arguments are stored the most
    completely wins. Loading a zip with the wrong class is what this avoids: DQN's loader would allocate its
    default replay buffer for a PPO checkpoint.
    """
    from stable_baselines3.common.base_class import BaseAlgorithm

    stored = set(data)
    policy = _policy_class(data)
    params = {name: set(constructor_params(name)) for name in available_algos()}
    every = set().union(*params.values()) - set(inspect.signature(BaseAlgorithm.__init__).parameters)
    best: tuple[int, str] | None = None
    for name, own in params.items():
        bases = tuple(algo_class(name).policy_aliases.values())
        if (policy is not None and not issubclass(policy, bases)) or (stored & every) - own:
            continue
        missing = len(own - stored)
        if best is None or missing < best[0]:
            best = (missing, name)
    return None if best is None else best[1]


def newest_readable_checkpoint(run_dir: str) -> tuple[int, str] | None:
    """``(steps, path)`` of the newest checkpoint whose zip can be read, or None."""
    for steps, path in reversed(list_checkpoints(run_dir)):
        if read_steps_of(path) is not None:
            return steps, path
    return None


def latest_model(run_dir: str) -> tuple[str, int]:
    """The model a finished or stopped run stands for: ``model.zip`` if present, else the newest checkpoint.

    Never silently falls back: an unreadable ``model.zip`` or newest checkpoint is a RunError naming it and
    the newest readable checkpoint to pass instead.
    """
    final = final_model_path(run_dir)
    checkpoints = list_checkpoints(run_dir)
    candidate = final if os.path.exists(final) else (checkpoints[-1][1] if checkpoints else None)
    if candidate is None:
        raise RunError(f"no model.zip or checkpoint in {run_dir}; train first (retrokit train ...)")
    steps = read_steps_of(candidate)
    if steps is None:
        readable = newest_readable_checkpoint(run_dir)
        fix = (
            f"pass {readable[1]} ({readable[0]} steps) instead"
            if readable
            else "no readable checkpoint is left"
        )
        raise RunError(f"cannot read {candidate}: not an SB3 model file; {fix}")
    return candidate, steps


def load_model(
    path: str,
    env: Any = None,
    device: str = "auto",
    algo: str | None = None,
    cls: type | None = None,
    overrides: dict[str, Any] | None = None,
) -> Any:
    """Load an SB3 zip with the class recorded in its run's config, or ``cls`` (RunError if unreadable).

    ``overrides`` are constructor arguments that replace the stored ones (SB3's ``load(**kwargs)``), e.g.
    the hyperparameters of a resumed run's config.yaml."""
    if algo is None:
        run = find_run_dir(path)
        algo = load_config(run)["algo"] if run else None
    if not zipfile.is_zipfile(path):
        raise RunError(f"cannot read checkpoint {path}: not an SB3 zip file; use an older checkpoint")
    last: Exception | None = None
    for name in [algo] if algo else available_algos():
        try:
            model = (cls or algo_class(name)).load(path, env=env, device=device, **(overrides or {}))
        except Exception as exc:  # noqa: BLE001 - report the cause in one line
            last = exc
        else:
            return model
    reason = str(last).splitlines()[0] if last else "?"
    raise RunError(f"cannot read checkpoint {path}: {reason}; use an older checkpoint in checkpoints/")


def _target_networks(policy: Any) -> list[tuple[Any, Any]]:
    """``(target, online)`` module pairs of an off-policy policy (DQN ``q_net``, QR-DQN ``quantile_net``)."""
    pairs = []
    for name, module in policy.named_children():
        online = getattr(policy, name.removesuffix("_target"), None) if name.endswith("_target") else None
        if online is not None:
            pairs.append((module, online))
    return pairs


def export_model(run_dir: str, out_dir: str) -> tuple[str, int]:
    """Write the run's final model (else its newest checkpoint) to ``out_dir/model.zip`` for evaluation and
    publication: the policy's weights with the optimizer's state (Adam's moments) dropped and, for DQN /
    QR-DQN, the target network equal to the online one (stored once). A Nature-CNN DQN then takes ~7 MB
    instead of ~27 MB. SB3's own ``load`` reads the file; continue training from the run's checkpoints, not
    from an export. Returns (path, steps)."""
    path, steps = latest_model(run_dir)
    model = load_model(path, device="cpu", algo=load_config(run_dir)["algo"])
    for optimizer in (getattr(model.policy, "optimizer", None), getattr(model, "ent_coef_optimizer", None)):
        if optimizer is not None:
            optimizer.state.clear()
    for target, online in _target_networks(model.policy):
        # the same tensors: torch.save writes shared storage once, and loading copies them apart again
        for t, o in zip(target.parameters(), online.parameters(), strict=True):
            t.data = o.data
    out = final_model_path(out_dir)
    atomic_write(out, model.save)
    return out, steps
