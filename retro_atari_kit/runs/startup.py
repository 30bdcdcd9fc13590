"""What every training engine checks before a run dir is written, and the lines a run prints when it ends.

Every engine's new run goes through :func:`prepare_new_run` (its resume through ``resume.prepare_resume``),
so each engine, present or future, gets the same env, device, backend, hyperparameter-range and run-dir
checks with the same one-line messages, the env built once; engines add only what is theirs through their
``RULES`` (:class:`~retro_atari_kit.runs.engine.EngineRules`), found in the engines' one table
(``runs.engine.ENGINE_REGISTRY``). Whether a CUDA device exists is asked of
``retro_atari_kit.models``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from retro_atari_kit.errors import RunError
from retro_atari_kit.limits import check_vector_env
from retro_atari_kit.models import check_network, cuda_devices
from retro_atari_kit.presets.ranges import check_ranges
from retro_atari_kit.protocols import training_env_kwargs
from retro_atari_kit.registration import check_env_id, open_env
from retro_atari_kit.runs.engine import engine_rules
from retro_atari_kit.runs.layout import (
    ENGINES,
    check_new_run_dir,
    create_run_dir,
    default_run_dir,
    remove_new_run_dir,
    single_env_kwargs,
    write_config,
)
from retro_atari_kit.runs.spec import TrainSpec
from retro_atari_kit.vector import BACKENDS, resolve_backend, worker_processes

Print = Callable[[str], None]

DEVICES = ("auto", "cpu", "cuda")
# A resumed segment seeds its envs ``seed + SEGMENT_SEED_STRIDE * segment``: fresh env randomness after a
# resume, and no overlap with the ``seed + rank`` seeds of up to this many envs of an earlier segment.
SEGMENT_SEED_STRIDE = 1000

__all__ = [
    "DEVICES",
    "check_backend",
    "check_device",
    "check_gpus",
    "check_network",
    "check_run_dir",
    "check_spec",
    "finished_lines",
    "prepare_new_run",
    "segment_seed",
    "stopped_lines",
]


def _cuda_devices() -> int:
    return cuda_devices()[0]


def check_device(device: str) -> None:
    """RunError for an unknown device, or a CUDA device that is not present."""
    kind, _, index = str(device).partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise RunError(f"unknown device {device!r}; choose auto, cpu, cuda or cuda:N")
    if kind != "cuda":
        return

    count, torch_version = cuda_devices()
    if count == 0:
        raise RunError(
            f"--device {device}: no CUDA GPU is usable here (torch {torch_version}); "
            "use --device auto or cpu, or install a CUDA build of torch"
        )
    if index and int(index) >= count:
        raise RunError(f"--device {device}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")


def check_gpus(num_gpus: Any) -> None:
    """RunError unless ``num_gpus`` (None: the engine decides) is a count of the GPUs present."""
    if num_gpus is None:
        return
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 0:
        raise RunError(f"--num-gpus {num_gpus!r}: pass a whole number >= 0")
    if num_gpus and num_gpus > _cuda_devices():
        raise RunError(
            f"--num-gpus {num_gpus}: this machine has {_cuda_devices()} usable CUDA GPU(s); "
            "pass --num-gpus 0 (or leave it out)"
        )


def check_backend(env_id: str, backend: str, env_kwargs: dict[str, Any], num_envs: int | None = None) -> None:
    """RunError unless the vector backend ``backend`` can run ``env_id`` with these kwargs (and, given
    ``num_envs``, unless that many envs fit this process's limits: ``retro_atari_kit.limits``)."""
    if backend not in BACKENDS:
        raise RunError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    game = gym.spec(env_id).kwargs["game"]
    try:  # the one being checked is `backend`
        chosen = resolve_backend(game, backend, **single_env_kwargs(env_kwargs))
    except ValueError as exc:
        raise RunError(f"--backend {backend}: {str(exc).strip().splitlines()[0]}") from None
    if num_envs:  # before the run dir is made: training would make these envs after it
        check_vector_env(env_id, num_envs, chosen, env_kwargs, worker_processes(chosen, num_envs, None))


def check_run_dir(run_dir: str, force: bool) -> None:
    """RunError unless a new run dir can be made at ``run_dir`` (see ``check_new_run_dir``) and its parent
    folders can be created: the nearest existing one must be a writable folder. Creates nothing."""
    check_new_run_dir(run_dir, force)
    parent = os.path.dirname(os.path.abspath(run_dir))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise RunError(
            f"cannot create run dir {run_dir}: {parent} is a file, not a folder; pass another --run-dir"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RunError(f"cannot create run dir {run_dir}: {parent} is not writable; pass another --run-dir")


def check_spec(spec: TrainSpec, force: bool = False) -> str:
    """The engine-neutral checks of a new run's ``spec`` that need no env: engine, env ID, network, device,
    GPUs, counts, ``--set`` value ranges and the run dir. Returns the run dir (``spec.run_dir`` or the
    default). Nothing is built or written."""
    if spec.engine not in ENGINES:
        raise RunError(f"unknown engine {spec.engine!r}; choose one of {', '.join(ENGINES)}")
    check_env_id(spec.env_id)
    check_network(spec.network)
    check_device(spec.device)
    check_gpus(spec.engine_options.get("num_gpus"))
    if spec.n_envs is not None and (not isinstance(spec.n_envs, int) or spec.n_envs < 1):
        raise RunError(f"--n-envs {spec.n_envs!r}: pass a whole number >= 1")
    if spec.checkpoint_every < 0 or spec.eval_every < 0:
        raise RunError("--checkpoint-every and --eval-every must be >= 0 (0 disables)")
    check_ranges(spec.overrides)
    if "backend" in spec.env_kwargs:
        raise RunError(
            f"--env-kwarg backend={spec.env_kwargs['backend']}: the vector backend is not an env kwarg; "
            f"use --backend {spec.env_kwargs['backend']}"
        )
    run_dir = spec.run_dir or default_run_dir(spec.env_id, spec.algo, spec.network, spec.seed)
    check_run_dir(run_dir, force)
    return run_dir


def prepare_new_run(spec: TrainSpec, force: bool = False, out: Print = print) -> tuple[dict[str, Any], str]:
    """Check a new run once, for the engine ``spec`` names, then create its run dir and ``config.yaml``.

    :func:`check_spec`, the training protocol's env kwargs (``protocols.training_env_kwargs``, so every
    engine trains under it with no word of protocols; the config records its name), the engine's config (its
    ``RULES.resolve``), the env that config makes (built once, here: kwargs, ROM), the vector backend, and
    the engine's checks on that env (``RULES.check_env``: the model builds, memory). Nothing is written
    before all of them passed. Returns ``(config, run_dir)``.
    """
    rules = engine_rules(spec.engine)  # first, as before any check: a missing framework is named first
    run_dir = check_spec(spec, force)
    spec = dataclasses.replace(
        spec, env_kwargs=training_env_kwargs(spec.protocol, spec.env_id, spec.env_kwargs)
    )
    config = with_protocol(rules.resolve(spec), spec.protocol)
    env_kwargs = single_env_kwargs(config["env_kwargs"])
    env = open_env(config["env_id"], env_kwargs)
    try:
        n_envs = config.get("n_envs") if rules.local_vector_env else None  # others' workers check their own
        check_backend(config["env_id"], spec.backend, env_kwargs, n_envs)
        lines = rules.check_env(config, env, force)
    finally:
        env.close()
    for line in [*rules.describe(config, run_dir), *lines]:
        out(line)
    create_run_dir(run_dir, force)
    try:
        write_config(run_dir, config)
    except BaseException:  # a full disk, a signal: the command leaves no empty run dir behind
        remove_new_run_dir(run_dir)
        raise
    return config, run_dir


def with_protocol(config: dict[str, Any], protocol: str) -> dict[str, Any]:
    """``config`` with ``protocol: NAME`` recorded just before its ``env_kwargs`` (which hold the protocol's
    settings): where a reader of config.yaml looks for how the run played."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key == "env_kwargs":
            out["protocol"] = protocol
        out[key] = value
    out.setdefault("protocol", protocol)
    return out


def segment_seed(seed: int, segment: int) -> int:
    """The env seed of segment ``segment`` of a run (0: the first run, k: the k-th resume)."""
    return int(seed) + SEGMENT_SEED_STRIDE * int(segment)


def stopped_lines(run_dir: str, steps: int, checkpoint: str) -> list[str]:
    """What a run stopped by Ctrl-C / SIGTERM prints: where it saved, and how to continue."""
    return [
        f"interrupted at {steps} steps; checkpoint {checkpoint}",
        f"resume with: retrokit train --resume {run_dir}",
    ]


def finished_lines(run_dir: str) -> list[str]:
    """What a finished run prints last: the commands that look at it."""
    return [
        f"next: retrokit eval {run_dir} | retrokit plot {run_dir} | retrokit record {run_dir} --out agent.mp4"
    ]
