"""The run directory: its layout, its ``config.yaml``, creating and finding it. Any engine uses this.

::

    runs/<env>-<algo>-<network>-<seed>-<time>/
        config.yaml            every resolved setting (``kind: retro-atari-kit run``, ``engine: sb3|rllib``)
        model.zip              the final model: an independent copy of the last checkpoint (RLlib: model/)
        checkpoints/           model_<steps>_steps[.zip], written atomically
        monitor/               <rank>.monitor.csv per env, TRUE game scores; resume-<k>/ per resumed segment
        progress.csv           the engine's logger table (resumed segments merged in)
        log.txt, events.*      human-readable log, tensorboard
        evaluations.csv        periodic evaluations
        orphaned-<k>/          logs written past the checkpoint a resume started from (see progress.py)
        .train.pid             the lock of the process training it (lock.py)
"""

from __future__ import annotations

import datetime as _dt
import errno
import glob
import os
import shutil
from typing import Any

import yaml

from retro_atari_kit.errors import RunError
from retro_atari_kit.files import (
    atomic_write_text,
    check_creatable,
    check_entries,
    os_error_message,
    read_error_message,
)
from retro_atari_kit.runs.engine import ENGINES  # the engines' one table
from retro_atari_kit.runs.lock import describe_owner, lock_owner, stop_hint
from retro_atari_kit.runs.stop import active_stop_request

CONFIG_FILE = "config.yaml"
CONFIG_MARKER = "retro-atari-kit run"
MONITOR_DIR = "monitor"
ORPHANED_PREFIX = "orphaned-"
# what training writes in a run dir, by kind: checked before a resume writes anything (check_entries);
# progress.csv is not: one that cannot be read is left as it was and not merged, saying so (progress.py)
RUN_FILES = ("log.txt", "evaluations.csv", "model.zip")
RUN_FOLDERS = ("checkpoints", MONITOR_DIR)
# bytes a run dir's path must leave free under the OS's longest path for the names made inside it
# (checkpoints/.model_<steps>_steps.tmp-<pid>.zip.old, orphaned-<k>/monitor/resume-<k>/<rank>.monitor.csv)
RUN_DIR_HEADROOM = 128
# run dir (absolute) -> the folders this process made for it (create_run_dir), outermost first: only those
# are removed again when the new run ends before it saved anything (remove_new_run_dir)
_made_here: dict[str, list[str]] = {}


def glob_in(folder: str, pattern: str) -> list[str]:
    """The paths in ``folder`` matching ``pattern``, sorted; ``folder``'s own name is taken literally (a run
    dir may be named ``[seed 0]``)."""
    return sorted(glob.glob(os.path.join(glob.escape(folder), pattern)))


def make_dirs(path: str) -> list[str]:
    """``os.makedirs(path)``, returning the folders it made (outermost first). If the OS refuses one of them,
    the ones made so far are removed again before the OSError is raised: a refused command leaves no trail
    of empty folders."""
    full, missing = os.path.abspath(path), []
    while not os.path.lexists(full) and os.path.dirname(full) != full:
        missing.append(full)
        full = os.path.dirname(full)
    made: list[str] = []
    try:
        for folder in reversed(missing):
            os.mkdir(folder)
            made.append(folder)
    except OSError:
        remove_made_dirs(made)
        raise
    if not missing:  # it was there already: as os.makedirs, say so
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
    return made


def remove_made_dirs(made: list[str]) -> None:
    """Remove the folders of :func:`make_dirs` again, innermost first, each only while it is empty."""
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            return  # something was put there meanwhile: kept, and so are the folders above it


def default_run_dir(env_id: str, algo: str, network: str, seed: int, root: str = "runs") -> str:
    """``<root>/<env>-<algo>-<network>-<seed>-<YYYYmmdd-HHMMSS>``."""
    env = env_id.split("/")[-1]
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join(root, f"{env}-{algo}-{network}-{seed}-{stamp}")


def check_new_run_dir(run_dir: str, force: bool) -> None:
    """Raise RunError unless ``create_run_dir(run_dir, force)`` would succeed. Changes nothing."""
    if not os.path.exists(run_dir):
        try:  # a name too long, a read-only disk, /proc, ...: said before anything is built
            check_creatable(run_dir, headroom=RUN_DIR_HEADROOM)
        except OSError as exc:
            raise RunError(os_error_message(exc, "cannot create run dir", flag="--run-dir")) from None
        return
    if not force:
        raise RunError(
            f"run dir {run_dir} exists; use --resume {run_dir} to continue it, --force to overwrite it, "
            "or another --run-dir"
        )
    is_run = os.path.isfile(os.path.join(run_dir, CONFIG_FILE))
    if not os.path.isdir(run_dir) or (os.listdir(run_dir) and not is_run):
        raise RunError(
            f"--force refuses to clear {run_dir}: it is not a retrokit run dir; pick another --run-dir"
        )
    owner = lock_owner(run_dir)
    if owner is not None:
        raise RunError(
            f"--force refuses to clear {run_dir}: {describe_owner(owner)} is training it; stop it first "
            f"({stop_hint(owner)})"
        )


def create_run_dir(run_dir: str, force: bool = False) -> None:
    """Create an empty run dir; with ``force`` an old run dir there (not being trained) is removed first.

    Inside ``stop_signals()``, a stop requested before this point ends the command here, with nothing written.
    The folders made (the run dir and any missing ones above it) are remembered, so that a new run that ends
    before its first checkpoint removes exactly them (:func:`remove_new_run_dir`); where the OS refuses one of
    them, those made so far are removed at once.
    """
    check_new_run_dir(run_dir, force)
    stop = active_stop_request()
    if stop is not None:
        stop.raise_if_requested("interrupted before the run dir was created; nothing was written")
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    try:
        made = make_dirs(run_dir)
    except OSError as exc:
        raise RunError(os_error_message(exc, "cannot create run dir", flag="--run-dir")) from None
    _made_here[os.path.abspath(run_dir)] = made


def made_here(run_dir: str) -> bool:
    """Whether this process made ``run_dir`` (:func:`create_run_dir`): a new run, not one being resumed."""
    return os.path.abspath(run_dir) in _made_here


def remove_new_run_dir(run_dir: str) -> bool:
    """Remove a run dir this process made, and the empty folders it made above it; True if it did. A run
    dir made by another process (one being resumed, even from its start) is never removed."""
    made = _made_here.pop(os.path.abspath(run_dir), None)
    if made is None:
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    remove_made_dirs(made[:-1])
    return not os.path.exists(run_dir)


def write_config(run_dir: str, config: dict[str, Any]) -> None:
    """Write ``config.yaml`` atomically, keys in insertion order."""
    atomic_write_text(os.path.join(run_dir, CONFIG_FILE), yaml.safe_dump(config, sort_keys=False))


def new_config(engine: str, command: str, **settings: Any) -> dict[str, Any]:
    """The common head of every run's config (marker, engine, kit version, time, command), then settings."""
    from retro_atari_kit import __version__

    if engine not in ENGINES:
        raise RunError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return {
        "kind": CONFIG_MARKER,
        "engine": engine,
        "kit_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        **settings,
    }


def load_config(run_dir: str) -> dict[str, Any]:
    """``config.yaml`` of a run made by the kit; RunError if absent, unreadable or not the kit's.

    Runs written before engines were recorded are SB3 runs (``engine`` defaults to ``sb3``).
    """
    path = os.path.join(run_dir, CONFIG_FILE)
    if os.path.isdir(path) or (os.path.islink(path) and not os.path.exists(path)):  # not "no config.yaml"
        why = "a folder" if os.path.isdir(path) else f"a link to {os.readlink(path)}, which does not exist"
        raise RunError(f"{path} is {why}; restore the run's {CONFIG_FILE} (or start a new run)")
    if not os.path.isfile(path):
        raise RunError(
            f"{run_dir} is not a retrokit run dir (no {CONFIG_FILE}); pass a run dir made by retrokit train"
        )
    try:
        with open(path, encoding="utf-8") as fh:
            config = yaml.safe_load(fh)
    except OSError as exc:  # permissions, a disk error: the file may be fine, so nothing invites replacing it
        raise RunError(read_error_message(exc)) from None
    except RecursionError:  # a config nested thousands of levels deep: no run writes one
        raise RunError(
            f"cannot read {path}: nested too deeply (no run's config is); restore it or start a new run"
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:  # damaged bytes too: not UTF-8, NUL
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"cannot read {path}: {why}; restore it or start a new run") from None
    if not isinstance(config, dict) or config.get("kind") != CONFIG_MARKER:
        raise RunError(f"{path} was not written by retrokit train; pass a run dir made by the kit")
    config.setdefault("engine", "sb3")
    _check_field_types(config, path)
    return config


# the type each field of a run's config.yaml has (a field may be absent: older runs, other engines); a
# damaged or hand-edited file is named here, before any field is used as what it should be
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("engine", "algo", "env_id", "network", "device", "backend", "command", "protocol"), (str,)
    ),
    "preset": (str, type(None)),
    **dict.fromkeys(("env_kwargs", "hyperparams"), (dict,)),
    **dict.fromkeys(
        ("timesteps", "n_envs", "seed", "eval_every", "eval_episodes", "checkpoint_every"), (int,)
    ),
    "preset_n_envs": (int, type(None)),
    "save_replay_buffer": (bool,),
}
_TYPE_NAMES = {
    str: "a name",
    dict: "a mapping",
    int: "an integer",
    bool: "true or false",
    type(None): "empty",
}


def _check_field_types(config: dict[str, Any], path: str) -> None:
    for field, types in _FIELD_TYPES.items():
        value = config.get(field)
        a_bool_for_a_number = isinstance(value, bool) and bool not in types
        if field not in config or (isinstance(value, types) and not a_bool_for_a_number):
            continue
        want = " or ".join(_TYPE_NAMES[t] for t in types)
        raise config_field_error(path, field, f"{value!r} is not {want}")


def config_text(value: Any) -> str:
    """``value`` as config.yaml writes it, in one line (``nature``, ``{features_dim: 256}``, ``[64]``), for
    error lines that say what to put back; a class by its name, anything else YAML cannot write by repr."""
    if isinstance(value, type):
        return value.__name__
    if not _plain(value):
        return repr(value)
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _plain(value: Any) -> bool:
    if isinstance(value, dict | list):
        return all(_plain(v) for v in (value.values() if isinstance(value, dict) else value))
    return isinstance(value, str | int | float | bool | type(None))


def single_env_kwargs(env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The kwargs of one env: ``env_kwargs`` without ``backend``, which picks the vector backend (an RLlib
    run's config keeps it among its env kwargs, for its runners' ``gym.make_vec``)."""
    return {k: v for k, v in (env_kwargs or {}).items() if k != "backend"}


def config_backend(config: dict[str, Any]) -> Any:
    """The vector backend a run's config names: ``backend`` (SB3) or ``env_kwargs.backend`` (RLlib)."""
    return config.get("backend") or (config.get("env_kwargs") or {}).get("backend", "auto")


def config_field_error(path: str, field: str, why: str) -> RunError:
    """The one-line error for a field of a run's ``config.yaml`` (``path``) that cannot be resumed."""
    return RunError(f"{path}: {field}: {why}; restore it (or start a new run)")


def check_config_fields(
    config: dict[str, Any], path: str, required: tuple[str, ...], int_fields: dict[str, int | None]
) -> None:
    """RunError naming the first field of ``required`` or ``int_fields`` missing from ``config``, or an
    ``int_fields`` value that is not an integer at least its lower bound (None: any integer)."""
    for field in (*required, *int_fields):
        if field not in config:
            raise config_field_error(path, field, "missing")
    for field, low in int_fields.items():
        value = config[field]
        if not isinstance(value, int) or isinstance(value, bool) or (low is not None and value < low):
            bound = f" >= {low}" if low is not None else ""
            raise config_field_error(path, field, f"{value!r} is not an integer{bound}")


def find_run_dir(path: str) -> str | None:
    """The run dir a model or checkpoint belongs to (``model.zip``, ``checkpoints/<x>``), or None."""
    here = os.path.dirname(os.path.abspath(path))
    for candidate in (here, os.path.dirname(here)):
        if os.path.isfile(os.path.join(candidate, CONFIG_FILE)):
            try:
                load_config(candidate)
            except RunError:
                continue
            return candidate
    return None


def open_for_resume(run_dir: str) -> dict[str, Any]:
    """The config of a run that ``--resume`` may continue: RunError if the dir is missing, not a kit run, or
    a live process is still training it."""
    if not os.path.isdir(run_dir):
        raise RunError(f"--resume {run_dir}: no such run dir")
    config = load_config(run_dir)
    check_entries(run_dir, files=RUN_FILES, folders=RUN_FOLDERS, what="--resume")
    owner = lock_owner(run_dir)
    if owner is not None:
        raise RunError(
            f"--resume {run_dir}: the run is still training ({describe_owner(owner)}); stop it first "
            f"({stop_hint(owner)})"
        )
    return config


def check_total_timesteps(run_dir: str, config: dict[str, Any], timesteps: int | None, trained: int) -> bool:
    """RunError if a new total ``timesteps`` is below the ``trained`` steps; True if config.yaml must
    record it (:func:`set_total_timesteps`). Writes nothing."""
    if timesteps is None:
        return False
    if timesteps < trained:
        raise RunError(
            f"--timesteps {timesteps} is below the {trained} steps {run_dir} has trained; pass a larger total"
        )
    return timesteps != config["timesteps"]


def set_total_timesteps(run_dir: str, config: dict[str, Any], timesteps: int | None, trained: int) -> None:
    """Record a new total for a resumed run in its config; RunError if it is below the ``trained`` steps."""
    if check_total_timesteps(run_dir, config, timesteps, trained):
        config["timesteps"] = int(timesteps)  # type: ignore[arg-type]
        write_config(run_dir, config)


def resume_segment(run_dir: str) -> int:
    """Number of the next resumed segment: 1 for the first resume, 2 for the second, ..."""
    return 1 + len(glob_in(os.path.join(run_dir, MONITOR_DIR), "resume-*"))


def monitor_dir(run_dir: str, segment: int = 0) -> str:
    """Where segment ``segment`` (0: the first run, k: the k-th resume) writes its monitor CSVs."""
    base = os.path.join(run_dir, MONITOR_DIR)
    return base if segment == 0 else os.path.join(base, f"resume-{segment}")
