"""Loading an SB3 zip of a kit run without unpickling anything from it.

SB3's ``Algorithm.load`` cloudpickles the ``{":serialized:": ...}`` values of the zip's JSON ``data`` (the
policy class, its kwargs, the spaces, schedules, the last observations): a crafted zip runs code on load.
The kit knows every one of those values from the run's ``config.yaml``, so it builds the model from the
config, reads the zip's members itself (sizes checked before inflating, against the model the config
builds), takes only plain counters from ``data``, and loads the weights with
``torch.load(..., weights_only=True)``. A zip with no run config would need unpickling: it is refused unless
the user says they trust it (``--allow-pickle``), as ``torch.load`` refuses pickles unless asked.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np
from retro_atari_kit.integrations.sb3.algorithms import algo_class
from retro_atari_kit.integrations.sb3.training.config import algo_kwargs

from retro_atari_kit.registration import probe_env
from retro_atari_kit.runs import RunError
from retro_atari_kit.runs.untrusted import (
    DEFAULT_BUDGET,
    SMALL_MEMBER,
    UntrustedFileError,
    check_members,
    plain_values,
    read_member,
)

#: counters of training progress restored from ``data`` (plain JSON numbers); every hyperparameter, the
#: policy and the spaces come from config.yaml
STATE_KEYS = (
    "num_timesteps",
    "_n_updates",
    "_episode_num",
    "_current_progress_remaining",
    "exploration_rate",
    "_n_calls",
)
#: the members SB3's ``save`` writes for the kit's algorithms; any other is refused
WEIGHTS = ("policy.pth", "policy.optimizer.pth", "pytorch_variables.pth")
TEXT = ("data", "_stable_baselines3_version", "system_info.txt")
#: what any member may inflate to before the config's model says more precisely (a Nature CNN on 84x84
#: frames: ~7 MB of weights; Adam's moments twice that)
FIRST_LOOK = 1 << 30


def _budgets(model: Any, n_envs: int) -> dict[str, int]:
    """What each member of a zip of ``model`` may inflate to: its weights (and Adam's two moments for the
    optimizer), plus torch's per-tensor framing; ``data`` holds counters and, pickled, the last batch of
    observations (which the kit never reads, but bounds)."""
    weights = sum(t.numel() * t.element_size() for t in model.policy.state_dict().values())
    space = model.observation_space
    frame = int(np.prod(space.shape or (1,))) * np.dtype(space.dtype or np.uint8).itemsize
    return {
        "policy.pth": weights + weights // 8 + SMALL_MEMBER,
        "policy.optimizer.pth": 2 * weights + weights // 8 + SMALL_MEMBER,
        "pytorch_variables.pth": SMALL_MEMBER,
        "data": 16 * SMALL_MEMBER + 4 * max(n_envs, 1) * frame,
        "_stable_baselines3_version": 4096,
        "system_info.txt": 65536,
    }


def _torch_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, device: Any) -> Any:
    import pickle

    import torch

    try:
        return torch.load(io.BytesIO(read_member(zf, info, path)), map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refused a global: the file asks to run code
        why = str(exc).strip().splitlines()[0][:160]
        raise UntrustedFileError(
            f"{path} member {info.filename!r} is not plain weights (torch refused it: {why}); refused"
        ) from None


def build_from_config(config: dict[str, Any], env: Any, device: Any, cls: type | None, spaces: Any) -> Any:
    """The SB3 model config.yaml describes, untrained, on ``env`` (else on ``spaces``: (obs, action))."""
    import warnings

    kwargs = algo_kwargs(config)
    policy = kwargs.pop("policy")
    klass = cls or algo_class(config["algo"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. PPO's batch-size note: the run's own settings
        model = klass(policy, env, device=device, verbose=0, _init_setup_model=False, **kwargs)
    if env is None:
        if spaces is None:
            spaces = probe_env(config["env_id"], config.get("env_kwargs") or {})
        model.observation_space, model.action_space = spaces
        model.n_envs = int(config.get("n_envs") or 1)
    model._setup_model()
    return model


def safe_load(
    path: str,
    config: dict[str, Any],
    env: Any = None,
    device: Any = "auto",
    cls: type | None = None,
    spaces: Any = None,
) -> Any:
    """The SB3 model of the run whose ``config`` this is, with the weights and counters of the zip ``path``.

    Nothing in ``path`` is unpickled; UntrustedFileError (a RunError, one line) for a member that is no plain
    weights, too large for the config's model, compressed like a bomb, or not one SB3 writes."""
    from stable_baselines3.common.utils import get_device

    device = get_device(device)
    try:  # bombs first, in the zip's directory, before the model is built (which takes seconds)
        with zipfile.ZipFile(path) as zf:
            n_envs = int(config.get("n_envs") or 1)
            check_members(zf, path, {"data": DEFAULT_BUDGET + n_envs * (1 << 17)}, default=FIRST_LOOK)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"cannot read checkpoint {path}: {why}; use an older checkpoint") from None
    model = build_from_config(config, env, device, cls, spaces)
    try:
        with zipfile.ZipFile(path) as zf:
            members = check_members(zf, path, _budgets(model, int(config.get("n_envs") or 1)), default=0)
            unknown = sorted(set(members) - set(WEIGHTS) - set(TEXT))
            if unknown:
                raise UntrustedFileError(
                    f"{path} member {unknown[0]!r} is not one SB3 writes for {config['algo']}; refused"
                )
            if "data" not in members or "policy.pth" not in members:
                raise RunError(f"cannot read checkpoint {path}: no 'data' or 'policy.pth' member")
            data = json.loads(read_member(zf, members["data"], path))
            if not isinstance(data, dict):
                raise RunError(f"cannot read checkpoint {path}: its data is not a JSON object")
            params = {"policy": _torch_member(zf, members["policy.pth"], path, device)}
            if "policy.optimizer.pth" in members:
                params["policy.optimizer"] = _torch_member(zf, members["policy.optimizer.pth"], path, device)
            extra = (
                _torch_member(zf, members["pytorch_variables.pth"], path, device)
                if "pytorch_variables.pth" in members
                else None
            )
    except (zipfile.BadZipFile, OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"cannot read checkpoint {path}: {why}; use an older checkpoint") from None
    if extra:  # SAC's log_ent_coef and the like: none of the kit's algorithms stores one
        raise UntrustedFileError(
            f"{path} holds torch variables {sorted(extra)} that {config['algo']} has not"
        )
    try:
        model.set_parameters(params, exact_match=True, device=device)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        why = str(exc).strip().splitlines()[0][:200]
        raise RunError(
            f"cannot read checkpoint {path}: its weights do not fit the network config.yaml builds ({why})"
        ) from None
    plain = plain_values(data)
    for key in STATE_KEYS:
        value = plain.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(model, key, type(getattr(model, key, value))(value))
    return model


#: the replay buffer beside the checkpoints: numpy arrays and a JSON member of counters, no pickle
REPLAY_STATE = "_scalars.npy"


def save_replay(buffer: Any, path: str) -> None:
    """Write the buffer's arrays and plain counters to ``path`` (an ``.npz``; SB3's own is a pickle)."""
    arrays = {k: v for k, v in vars(buffer).items() if isinstance(v, np.ndarray)}
    scalars = {
        k: v
        for k, v in vars(buffer).items()
        if isinstance(v, (bool, int, float)) or (isinstance(v, list) and all(type(x) is int for x in v))
    }
    encoded = np.frombuffer(json.dumps(scalars).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays, **{REPLAY_STATE.removesuffix(".npy"): encoded})


def load_replay(buffer: Any, path: str) -> None:
    """Fill ``buffer`` (built from config.yaml) from a file of :func:`save_replay`: each array must be one
    the buffer has, of its dtype and shape (a terminal-frame pool may have grown, up to one frame per slot),
    each counter one it has, of its type. Nothing is unpickled (``allow_pickle=False``); sizes are checked
    before inflating."""
    own = {k: v for k, v in vars(buffer).items() if isinstance(v, np.ndarray)}
    budgets = {f"{k}.npy": v.nbytes + 4096 for k, v in own.items()}
    if "terminal_frames" in own:  # grows by doubling, never past one frame per stored transition
        frame = own["terminal_frames"][0].nbytes
        budgets["terminal_frames.npy"] = 2 * buffer.buffer_size * buffer.n_envs * frame + 4096
    budgets[REPLAY_STATE] = SMALL_MEMBER
    with zipfile.ZipFile(path) as zf:
        check_members(zf, path, budgets, default=0)
    with np.load(path, allow_pickle=False) as npz:
        for name in npz.files:
            key = name.removesuffix(".npy")
            if name == REPLAY_STATE.removesuffix(".npy"):
                continue
            value, mine = npz[name], own.get(key)
            grows = key == "terminal_frames" and mine is not None and value.shape[1:] == mine.shape[1:]
            if mine is None or value.dtype != mine.dtype or (value.shape != mine.shape and not grows):
                raise UntrustedFileError(f"{path}: {key!r} does not fit the replay buffer config.yaml builds")
            setattr(buffer, key, value.copy())
        scalars = json.loads(npz[REPLAY_STATE.removesuffix(".npy")].tobytes())
    for key, value in scalars.items():
        mine = getattr(buffer, key, None)
        if isinstance(mine, (bool, int, float, list)) and type(value) is type(mine):
            setattr(buffer, key, value)
