"""RetroKit envs on every RLlib env runner, on any node, with no import on the workers.

gymnasium 1.x has no plugin autoload, so a fresh Ray worker does not know ``RetroKit/`` IDs
(``NamespaceNotFound``). gymnasium's ``"module:ID"`` syntax imports the module first: the runners get
``"retro_atari_kit:RetroKit/Pong-v0"``, which registers the namespace in whatever process makes the env.
``gym_env_vectorize_mode="vector_entry_point"`` makes RLlib call the kit's ``gym.make_vec`` backends (ALE's
C++ threads, shared-memory subprocesses for stable-retro) instead of wrapping ``num_envs`` single envs, and
the kit kwargs (``crop_score``, ``sticky_actions``, ``backend``, ...) travel in ``env_config``.

:func:`check_nodes` asks every alive node, before any runner starts, whether it can make the env, so a node
without the kit or without a stable-retro ROM is one line naming the node and the fix.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from retro_atari_kit.integrations.rllib.address import check_address

from retro_atari_kit.runs import RunError

MODULE_PREFIX = "retro_atari_kit:"
INSTALL_HINT = 'pip install "retro-atari-kit[rllib]"'

# check_address lives in .address (probing --address); re-exported here, where it used to be
__all__ = ["MODULE_PREFIX", "check_address", "check_nodes", "configure_env", "worker_env_id"]


def worker_env_id(env_id: str) -> str:
    """``"retro_atari_kit:RetroKit/<Game>-v0"`` for a registered RetroKit ID; RunError otherwise."""
    import retro_atari_kit  # noqa: F401  (registers the namespace here, to validate the ID)
    from retro_atari_kit.registration import check_env_id

    bare = env_id[len(MODULE_PREFIX) :] if env_id.startswith(MODULE_PREFIX) else env_id
    check_env_id(bare)
    return MODULE_PREFIX + bare


def runner_env_kwargs(env_id: str, env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``env_kwargs`` as each runner's ``gym.make_vec`` gets them: on the native backend, every env in the
    runner's own process (``shards=1``) unless they set ``shards``. RLlib scales out with env runners, each
    with its CPUs; the kit's default (a worker process per core on 8 cores or more) would start that many
    under every runner of a node."""
    kwargs = dict(env_kwargs or {})
    if "shards" in kwargs:
        return kwargs
    from retro_atari_kit.vector import resolve_backend

    vector_level = ("autoreset_mode", "start_method", "vectorization_mode")
    env_only = {key: value for key, value in kwargs.items() if key not in vector_level}
    try:
        game = gym.spec(env_id[len(MODULE_PREFIX) :]).kwargs["game"]
        if resolve_backend(game, **env_only) == "native":
            kwargs["shards"] = 1
    except (TypeError, ValueError, KeyError, gym.error.Error):  # the runner's gym.make_vec says so, as before
        pass
    return kwargs


def configure_env(config: Any, env_id: str, env_kwargs: dict[str, Any] | None = None) -> Any:
    """Point an RLlib ``AlgorithmConfig`` at a RetroKit env (in place; returns it).

    Sets the module-prefixed ID, ``env_config`` (:func:`runner_env_kwargs`, passed to ``gym.make_vec`` on
    every runner),
    ``gym_env_vectorize_mode="vector_entry_point"`` (the kit's vector backends) and ``clip_rewards=False``
    (the env clips to sign already; clipping again is harmless for signs but hides misconfiguration).
    """
    env_id = worker_env_id(env_id)
    config.environment(env=env_id, env_config=runner_env_kwargs(env_id, env_kwargs), clip_rewards=False)
    config.env_runners(gym_env_vectorize_mode=gym.VectorizeMode.VECTOR_ENTRY_POINT)
    return config


def check_nodes(env_id: str, env_kwargs: dict[str, Any] | None = None, timeout: float = 120.0) -> list[str]:
    """Make ``env_id`` once on every alive node of the connected Ray cluster; returns the node IPs checked.

    Raises RunError naming the first node that cannot (kit not installed, ROM missing, bad kwargs) and the
    fix. Needs ``ray.init`` first. The probe is a zero-CPU task pinned to each node; it is defined inside this
    function so Ray ships it by value and it runs even where the kit is not importable.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    bare = worker_env_id(env_id)[len(MODULE_PREFIX) :]
    kwargs = dict(env_kwargs or {})

    def probe(env: str, kw: dict) -> tuple[str, str]:
        try:
            from retro_atari_kit.registration import make_env
        except ImportError as exc:
            return "kit", str(exc)
        try:
            make_env(env, **kw).close()
        except Exception as exc:  # noqa: BLE001  (any failure is reported with its node)
            text = str(exc).strip().splitlines()
            return "env", text[0] if text else type(exc).__name__
        return "ok", ""

    remote = ray.remote(num_cpus=0)(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [
        remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            bare, kwargs
        )
        for n in nodes
    ]
    for node, ref in zip(nodes, refs, strict=True):
        where = f"node {node.get('NodeManagerAddress')} (id {node['NodeID'][:8]})"
        try:
            kind, detail = ray.get(ref, timeout=timeout)
        except Exception as exc:  # noqa: BLE001  (the probe could not even start there)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            raise RunError(
                f"{where} cannot run the kit's env probe ({first}); {INSTALL_HINT} on it"
            ) from None
        if kind == "kit":
            raise RunError(
                f"{where}: retro_atari_kit is not importable there ({detail}); run `{INSTALL_HINT}` on that "
                "node (same version as here) or pass it in runtime_env={'pip': ['retro-atari-kit[rllib]']}"
            )
        if kind == "env":
            fix = "run `retrokit import-roms DIR` on that node" if "ROM" in detail else "fix the env kwargs"
            raise RunError(f"{where} cannot make {bare}: {detail}; {fix}")
    return [str(n.get("NodeManagerAddress")) for n in nodes]
