"""Vectorised backends behind ``gym.make_vec("RetroKit/<id>", num_envs=N)`` (see docs/vectorization.md).

Every ``RetroKit/`` ID registers :func:`make_vector_env` as its ``vector_entry_point``; gymnasium calls it
as ``make_vector_env(num_envs=N, game=<game>, **kwargs)``. Backends (``backend=`` kwarg):

- ``"native"``: ale-py's ``AtariVectorEnv`` (C++ threads) under a thin numpy layer giving the kit's
  semantics (ALE games only, and only for kwargs it can express exactly); in this process, or with
  ``shards=S`` over S worker processes (the default on 8 cores or more).
- ``"subprocess"``: one env per worker process, frames through shared memory, stacking in this process.
- ``"inprocess"``: all envs stepped in this process (debugging).
- ``"auto"`` (default): ``native`` for ALE games when the kwargs allow it, else ``subprocess``; always
  ``subprocess`` for stable-retro games (one emulator per process).
"""

from __future__ import annotations

from typing import Any

from gymnasium.vector import AutoresetMode, VectorEnv

from retro_atari_kit.errors import as_int
from retro_atari_kit.limits import check_vector_env, memory_errors
from retro_atari_kit.vector._factory import EnvFactory, game_kind, split_frame_stack
from retro_atari_kit.vector._pool import WorkerDiedError
from retro_atari_kit.vector._stacked import StackedVectorEnv

BACKENDS = ("auto", "native", "subprocess", "inprocess")

__all__ = [
    "BACKENDS",
    "StackedVectorEnv",
    "WorkerDiedError",
    "make_vector_env",
    "resolve_backend",
    "worker_processes",
]


def worker_processes(backend: str, num_envs: int, shards: Any = None) -> int:
    """Worker processes ``backend`` starts for ``num_envs`` envs: the subprocess backend one per env, the
    native one per shard when there is more than one (ValueError for a bad ``shards``)."""
    if backend == "subprocess":
        return num_envs
    if backend == "native":
        from retro_atari_kit.vector.native_shards import check_shards  # imports ale-py: only when needed

        n = check_shards(shards, num_envs)
        return n if n > 1 else 0
    return 0


def _validated(game: str, kind: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The per-env kwargs validated once, before any worker starts (ALE: resolved with defaults)."""
    if kwargs.get("render_mode") == "human":  # a window per env, each opened by a worker process
        raise ValueError(
            f"RetroKit/{game}-v0: gym.make_vec does not take render_mode='human' (it would open one window "
            "per env); watch one env with gym.make(id, render_mode='human'), or use render_mode='rgb_array' "
            "(env.render() returns every env's frame)"
        )
    if kind == "ale":
        from retro_atari_kit.envs.ale import validate_ale_kwargs

        return validate_ale_kwargs(game, kwargs)
    from retro_atari_kit.envs.retro import validate_retro_kwargs

    validate_retro_kwargs(game, kwargs)
    return kwargs


def _choose_backend(game: str, kind: str, backend: str, cfg: dict[str, Any]) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}")
    if kind == "retro":
        if backend in ("native", "inprocess"):
            raise ValueError(
                f"backend={backend!r} is not available for the stable-retro game {game!r}: "
                "stable-retro allows one emulator per process; use backend='subprocess' (or 'auto')"
            )
        return "subprocess"
    if backend in ("subprocess", "inprocess"):
        return backend
    from retro_atari_kit.vector.native_ale import native_incompatibilities

    problems = native_incompatibilities(cfg)
    if backend == "native" and problems:
        raise ValueError(
            f"backend='native' cannot express {'; '.join(problems)}; use backend='subprocess' or 'auto'"
        )
    return "subprocess" if problems else "native"


def resolve_backend(game: str, backend: str = "auto", **kwargs: Any) -> str:
    """The backend ``make_vector_env`` uses for ``game`` with these env kwargs (no env is created).

    Raises ``ValueError`` for an unknown backend or kwarg, ``native`` for a stable-retro game, and
    ``native`` with kwargs ale-py's vector env cannot express exactly (the message names them).
    """
    kind = game_kind(game)
    return _choose_backend(game, kind, backend, _validated(game, kind, kwargs))


def make_vector_env(
    game: str,
    num_envs: int = 1,
    backend: str = "auto",
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    start_method: str | None = None,
    shards: int | None = None,
    **kwargs: Any,
) -> VectorEnv:
    """Build ``num_envs`` copies of the ``game`` stack as one gymnasium ``VectorEnv``.

    ``kwargs`` are the per-env kwargs of ``gym.make`` (``noop_max``, ``frame_stack``, ...). ``backend``
    picks the implementation (see the module docstring); ``vectorization_mode`` is ``gym.make_vec``'s own
    argument, never a backend (gymnasium refuses any value but its own). ``autoreset_mode`` is
    gymnasium's (``NEXT_STEP`` default, ``SAME_STEP`` or ``DISABLED``, with gymnasium's info layout; see
    :class:`StackedVectorEnv`).
    ``start_method`` (``"forkserver"`` default, ``"spawn"``, ``"fork"``) applies to the worker processes.
    ``shards`` (native backend only) splits the envs over that many worker processes (``1``: all in this
    process; default: :func:`~retro_atari_kit.vector.native_shards.default_shards`, on 8 cores or more one
    per core with at least two envs each, else 1).
    Observations are uint8 ``(num_envs, frame_stack, 84, 84)`` and equal those of ``num_envs``
    ``gym.make`` envs; reset with ``seed=s`` seeds env ``i`` with ``s + i``.
    """
    count = as_int(num_envs)  # numpy integers too; a Python int from here on
    if count is None or count < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    num_envs = count
    if "vectorization_mode" in kwargs:  # only a direct call gets here: gym.make_vec consumes it
        raise ValueError(
            f"vectorization_mode={kwargs['vectorization_mode']!r} is gym.make_vec's argument, not a backend: "
            f"choose the kit's backend with backend= (one of {', '.join(BACKENDS)})"
        )
    try:
        autoreset_mode = AutoresetMode(autoreset_mode)
    except ValueError:
        raise ValueError(
            "autoreset_mode must be AutoresetMode.NEXT_STEP ('NextStep'), AutoresetMode.SAME_STEP "
            f"('SameStep') or AutoresetMode.DISABLED ('Disabled'); got {autoreset_mode!r}"
        ) from None
    kind = game_kind(game)
    cfg = _validated(game, kind, kwargs)  # one clear error here, before any worker starts
    chosen = _choose_backend(game, kind, backend, cfg)
    if chosen != "native" and shards is not None:
        raise ValueError(
            f"shards={shards!r} applies to the native ALE backend only; "
            f"RetroKit/{game}-v0 uses backend={chosen!r} here"
        )
    processes = worker_processes(chosen, num_envs, shards)  # the one count of workers (and of shards)
    check_vector_env(f"RetroKit/{game}-v0", num_envs, chosen, cfg, processes)
    # a failed allocation while the envs are made: one line naming them and the limit (a `with`, not a
    # wrapper: the backends' warnings keep pointing at the caller's line)
    with memory_errors(f"making RetroKit/{game}-v0 x {num_envs} envs"):
        if chosen == "native":
            from retro_atari_kit.vector.native_shards import make_native_vector_env

            count = max(processes, 1)  # 0 workers: every env in this process
            return make_native_vector_env(
                game, num_envs, autoreset_mode, cfg, count, shards is None, start_method
            )
        frame_stack, per_env = split_frame_stack(kwargs)
        factories = [EnvFactory(game, kind, per_env) for _ in range(num_envs)]
        if chosen == "inprocess":
            from retro_atari_kit.vector.inprocess import make_inprocess_vector_env

            return make_inprocess_vector_env(factories, frame_stack, autoreset_mode)
        from retro_atari_kit.vector.subprocess import make_subprocess_vector_env

        return make_subprocess_vector_env(factories, frame_stack, autoreset_mode, start_method)
