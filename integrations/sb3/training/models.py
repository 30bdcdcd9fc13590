"""SB3 model files of a run: atomic saves, checkpoints, and loading the right one with the right class."""

from __future__ import annotations

import inspect
import os
import zipfile
from functools import partial
from typing import Any

from retro_atari_kit.integrations.sb3.algorithms import algo_class, available_algos, constructor_params

from retro_atari_kit.files import read_error_message
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
from retro_atari_kit.runs.untrusted import UntrustedFileError, read_json_member, refuse_pickled

REPLAY_FILE = "replay_buffer.npz"  # arrays, no pickle (safe_load.save_replay)


def save_checkpoint(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """Save ``checkpoints/model_<steps>_steps.zip`` atomically (and the replay buffer if asked)."""
    path = checkpoint_path(run_dir, int(model.num_timesteps))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, model.save)
    if save_replay and getattr(model, "replay_buffer", None) is not None:
        from retro_atari_kit.integrations.sb3.training.safe_load import save_replay

        atomic_write(
            os.path.join(os.path.dirname(path), REPLAY_FILE), partial(save_replay, model.replay_buffer)
        )
    return path


def save_final(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """The last checkpoint, published as ``model.zip`` (an independent copy). Returns model.zip."""
    final = final_model_path(run_dir)
    publish_final_model(save_checkpoint(model, run_dir, save_replay), final)
    return final


def checkpoint_data(model_zip: str) -> dict[str, Any] | None:
    """The JSON ``data`` an SB3 zip stores (attributes, spaces, ``num_timesteps``), or None if unreadable."""
    try:  # size-checked before inflating: an untrusted zip may be a bomb
        data = read_json_member(model_zip)
        int(data["num_timesteps"])
    except Exception:  # noqa: BLE001 - any damage means "unreadable"
        return None
    return data


def read_steps_of(model_zip: str) -> int | None:
    """``num_timesteps`` stored in an SB3 zip, or None if the file cannot be read as one."""
    data = checkpoint_data(model_zip)
    return None if data is None else int(data["num_timesteps"])


def _policy_module(data: dict[str, Any]) -> str | None:
    """The module of the policy class a zip's ``data`` names, read from the plain ``__module__`` SB3 stores
    beside the pickled class (which is never unpickled), or None."""
    stored = data.get("policy_class")
    module = stored.get("__module__") if isinstance(stored, dict) else None
    return module if isinstance(module, str) else None


def checkpoint_algo(data: dict[str, Any]) -> str | None:
    """The algorithm (``ppo``, ``a2c``, ``dqn``, ``qrdqn``) whose ``save`` wrote ``data``; None if none fits.

    Read from the zip without building a model or unpickling: the policy class (its plain ``__module__``)
    must come from the algorithm's policies where it is one of SB3's, and no stored attribute may be a
    constructor argument of another algorithm only. Of those that fit (A2C's attributes are a subset of
    PPO's), the one whose own arguments are stored the most completely wins. Loading a zip with the wrong
    class is what this avoids: DQN's loader would allocate its default replay buffer for a PPO checkpoint.
    """
    from stable_baselines3.common.base_class import BaseAlgorithm

    stored = set(data)
    module = _policy_module(data)
    params = {name: set(constructor_params(name)) for name in available_algos()}
    every = set().union(*params.values()) - set(inspect.signature(BaseAlgorithm.__init__).parameters)
    sb3_modules = {c.__module__ for name in params for c in algo_class(name).policy_aliases.values()}
    module = module if module in sb3_modules else None  # the kit's own policies serve several algorithms
    best: tuple[int, str] | None = None
    for name, own in params.items():
        modules = {cls.__module__ for cls in algo_class(name).policy_aliases.values()}
        if (module is not None and module not in modules) or (stored & every) - own:
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
        try:  # a file refused as untrusted (a bomb, a link out) says why, not just "unreadable"
            read_json_member(candidate)
        except UntrustedFileError as exc:
            raise RunError(str(exc)) from None
        except Exception:  # noqa: BLE001 - any other damage is the line below
            pass
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
    allow_pickle: bool = False,
    spaces: Any = None,
) -> Any:
    """Load an SB3 zip as the model its run's config.yaml describes, unpickling nothing (RunError, one line,
    if unreadable or refused: :mod:`.safe_load`).

    A zip outside a kit run dir has no config to take its values from: refused, unless ``allow_pickle``
    (the user trusts its maker), where SB3's own ``load`` reads it as ``algo`` (else each algorithm in turn).
    ``overrides`` are kept for callers that pass config.yaml's hyperparameters: they already come from the
    config. ``spaces`` (obs, action) spare building an env to learn them when ``env`` is None."""
    from retro_atari_kit.integrations.sb3.training.safe_load import safe_load

    try:  # a file it may not read is that, not "not an SB3 zip" (is_zipfile says False for both)
        open(path, "rb").close()
    except OSError as exc:
        raise RunError(read_error_message(exc)) from None
    if not zipfile.is_zipfile(path):
        raise RunError(f"cannot read checkpoint {path}: not an SB3 zip file; use an older checkpoint")
    run = find_run_dir(path)
    if run is not None:
        config = load_config(run)
        if algo is not None and str(config.get("algo")).lower() != str(algo).lower():
            raise RunError(f"{path} belongs to a {config.get('algo')} run, not {algo}")
        return safe_load(path, config, env=env, device=device, cls=cls, spaces=spaces)
    if not allow_pickle:
        data = checkpoint_data(path)
        raise refuse_pickled(path, data or {})
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
    model = load_model(path, device="cpu", algo=load_config(run_dir)["algo"])  # never unpickles
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
