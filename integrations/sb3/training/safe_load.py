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
import os
import zipfile
from typing import Any

import numpy as np
from retro_atari_kit.integrations.sb3.algorithms import algo_class
from retro_atari_kit.integrations.sb3.training.config import algo_kwargs

from retro_atari_kit.files import read_error_message
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
    import warnings

    import torch

    data = read_member(zf, info, path)
    try:
        with warnings.catch_warnings():  # torch's notes on a file it is about to refuse ("Detected pickle
            warnings.simplefilter("ignore")  # protocol 4 ..."): the refusal below is the one line
            return torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refused a global: the file asks to run code
        raise UntrustedFileError(
            f"{path} member {info.filename!r} is not plain weights (torch refused it: {_torch_why(exc)}); "
            "refused"
        ) from None
    except (RuntimeError, EOFError, ValueError, TypeError, KeyError, AttributeError) as exc:  # not torch's
        raise RunError(
            f"cannot read checkpoint {path}: member {info.filename!r} is not torch weights "
            f"({_torch_why(exc)}); use an older checkpoint"
        ) from None


def _torch_why(exc: BaseException) -> str:
    """What torch's (long, multi-paragraph) load error says is wrong: the words after "WeightsUnpickler
    error:" where it has them (e.g. "Unsupported operand 149"), else its first line."""
    text = str(exc)
    _, marker, rest = text.partition("WeightsUnpickler error:")
    lines = [line.strip() for line in (rest if marker else text).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:160]


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
    except OSError as exc:  # permissions, a disk error: said as such (the file may be fine)
        raise RunError(read_error_message(exc, "cannot read checkpoint")) from None
    except (zipfile.BadZipFile, EOFError) as exc:
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
    except OSError as exc:
        raise RunError(read_error_message(exc, "cannot read checkpoint")) from None
    except RecursionError:  # JSON nested thousands of levels deep: SB3 writes none
        raise RunError(
            f"cannot read checkpoint {path}: its data is nested too deeply; use an older checkpoint"
        ) from None
    except (zipfile.BadZipFile, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
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


#: the replay buffer's counters of progress, restored from the file (checked against the arrays); every
#: other counter (its size, n_steps, gamma, ...) is a setting, taken from config.yaml as the buffer is built
REPLAY_PROGRESS = ("pos", "full", "_free_terminal")


class _ReplayRefused(RunError):
    """A replay buffer file that cannot be loaded: one line naming it and what to do."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(
            f"cannot load the replay buffer {path}: {why}; delete it to resume with an empty buffer (it "
            "refills), or restore it"
        )


def _budgets_of(buffer: Any, own: dict[str, np.ndarray]) -> dict[str, int]:
    budgets = {f"{k}.npy": v.nbytes + 4096 for k, v in own.items()}
    if "terminal_frames" in own:  # grows by doubling, never past one frame per stored transition
        frame = own["terminal_frames"][0].nbytes
        budgets["terminal_frames.npy"] = 2 * buffer.buffer_size * buffer.n_envs * frame + 4096
    budgets[REPLAY_STATE] = SMALL_MEMBER
    return budgets


def _npy_header(fh: Any) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the start of a ``.npy`` stream (no pickle: the header is a literal)."""
    read = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }.get(np.lib.format.read_magic(fh))
    if read is None:
        raise ValueError("an array format save_replay does not write")
    shape, _, dtype = read(fh)
    return tuple(shape), dtype


def _fits(key: str, shape: tuple[int, ...], dtype: np.dtype, mine: np.ndarray | None) -> bool:
    grows = key == "terminal_frames" and mine is not None and shape[1:] == mine.shape[1:]
    return mine is not None and dtype == mine.dtype and (shape == mine.shape or grows)


def check_replay(buffer: Any, path: str) -> dict[str, Any]:
    """Check a file of :func:`save_replay` against ``buffer`` (built from config.yaml) without keeping a byte
    of it: the zip's directory (sizes before inflating), every member's checksum (streamed, in chunks), each
    array's header (one the buffer has, of its dtype and shape), that none of the buffer's arrays is missing,
    and its counters (the progress ones of the right type and in range). Returns the counters to restore.
    RunError (one line naming the file and what to do) for anything :func:`load_replay` would fail on."""
    own = {k: v for k, v in vars(buffer).items() if isinstance(v, np.ndarray)}
    try:
        with zipfile.ZipFile(path) as zf:
            members = check_members(zf, path, _budgets_of(buffer, own), default=0)
            state = members.pop(REPLAY_STATE, None)
            if state is None:
                raise _ReplayRefused(path, "it holds no counters (_scalars)")
            shapes = {}
            for name, info in members.items():
                key = name.removesuffix(".npy")
                with zf.open(info) as fh:
                    shape, dtype = _npy_header(fh)
                    while fh.read(1 << 24):  # to its end: zipfile checks the member's CRC-32 there
                        pass
                shapes[key] = (tuple(shape), dtype)
            counters = np.lib.format.read_array(io.BytesIO(read_member(zf, state, path)), allow_pickle=False)
            scalars = json.loads(counters.tobytes())
    except RunError:  # said already (UntrustedFileError is one)
        raise
    except OSError as exc:
        raise RunError(read_error_message(exc, "cannot load the replay buffer")) from None
    except RecursionError:
        raise _ReplayRefused(path, "its counters are nested too deeply") from None
    except (zipfile.BadZipFile, EOFError, ValueError, UnicodeDecodeError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _ReplayRefused(path, f"damaged ({why})") from None
    for key, (shape, dtype) in shapes.items():
        if not _fits(key, shape, dtype, own.get(key)):
            raise UntrustedFileError(f"{path}: {key!r} does not fit the replay buffer config.yaml builds")
    missing = sorted(set(own) - set(shapes))
    if missing:
        raise _ReplayRefused(path, f"it lacks {missing[0]!r}, which the buffer config.yaml builds has")
    return _check_counters(buffer, path, scalars, shapes)


def _check_counters(buffer: Any, path: str, scalars: Any, shapes: dict[str, Any]) -> dict[str, Any]:
    """The progress counters of ``scalars`` to restore; _ReplayRefused for one of the wrong type or out of
    range (a position past the buffer, a free terminal slot past the terminal store), and for a setting whose
    type is not the one the buffer has."""
    if not isinstance(scalars, dict):
        raise _ReplayRefused(path, f"its counters are {type(scalars).__name__}, not a mapping")
    for key, value in scalars.items():
        mine = getattr(buffer, key, None)
        if isinstance(mine, (bool, int, float, list)) and type(value) is not type(mine):
            raise _ReplayRefused(
                path, f"counter {key!r} is {type(value).__name__}, not {type(mine).__name__}"
            )
    size = int(buffer.buffer_size)
    pos = scalars.get("pos", 0)
    if not 0 <= pos < size:
        raise _ReplayRefused(path, f"counter 'pos' is {pos}, outside 0..{size - 1}")
    if "_free_terminal" in scalars:
        slots = shapes.get("terminal_frames", ((0,), None))[0][0]
        free = scalars["_free_terminal"]
        if any(type(i) is not int or not 0 <= i < slots for i in free) or len(set(free)) != len(free):
            raise _ReplayRefused(path, f"counter '_free_terminal' names slots outside 0..{slots - 1}")
    return {key: scalars[key] for key in REPLAY_PROGRESS if key in scalars}


def load_replay(buffer: Any, path: str) -> None:
    """Fill ``buffer`` (built from config.yaml) from a file of :func:`save_replay`, after
    :func:`check_replay`: each array one the buffer has, of its dtype and shape (a terminal-frame pool may
    have grown, up to one frame per slot), its progress counters of their type and in range; the buffer's
    settings stay config.yaml's. Nothing is unpickled (``allow_pickle=False``); sizes are checked before
    inflating. RunError, one line, for a file it cannot load."""
    restore = check_replay(buffer, path)
    own = {k: v for k, v in vars(buffer).items() if isinstance(v, np.ndarray)}
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files if name != REPLAY_STATE.removesuffix(".npy")}
    except OSError as exc:
        raise RunError(read_error_message(exc, "cannot load the replay buffer")) from None
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:  # changed since it was checked
        raise _ReplayRefused(path, f"damaged ({str(exc).strip()[:120] or type(exc).__name__})") from None
    for key, value in arrays.items():
        if not _fits(key, value.shape, value.dtype, own.get(key)):  # the file changed since the check
            raise UntrustedFileError(f"{path}: {key!r} does not fit the replay buffer config.yaml builds")
    if "terminal_index" in arrays:
        slots = len(arrays.get("terminal_frames", own.get("terminal_frames", ())))
        index = arrays["terminal_index"]
        if index.size and (index.min() < -1 or index.max() >= slots):
            raise _ReplayRefused(path, "'terminal_index' points past the terminal frames it holds")
    if "history" in arrays and hasattr(buffer, "stack") and arrays["history"].size:
        if int(arrays["history"].max()) >= int(buffer.stack):
            raise _ReplayRefused(path, f"'history' reaches past the {buffer.stack} stacked frames")
    for key, value in arrays.items():
        setattr(buffer, key, value)
    for key, value in restore.items():
        setattr(buffer, key, value)


def check_resume_load(checkpoint: str, config: dict[str, Any], obs_space: Any, action_space: Any) -> None:
    """Load what ``train`` loads to resume from ``checkpoint`` (the run layer's trial load, before the run dir
    is written): the zip's weights into the model config.yaml builds, and, for an off-policy algorithm, the
    replay buffer saved beside it (checked, not kept). RunError, one line, for what ``train`` would refuse."""
    import warnings

    from retro_atari_kit.integrations.sb3.algorithms import OFF_POLICY
    from retro_atari_kit.integrations.sb3.training.models import REPLAY_FILE

    with warnings.catch_warnings():  # e.g. SB3's note that a large buffer may not fit: said at training
        warnings.simplefilter("ignore")
        model = safe_load(checkpoint, config, device="cpu", spaces=(obs_space, action_space))
    replay = os.path.join(os.path.dirname(checkpoint), REPLAY_FILE)
    if config["algo"] in OFF_POLICY and os.path.exists(replay):
        check_replay(model.replay_buffer, replay)
