"""The RLlib engine's part of the run layer's checks (``retro_atari_kit.runs.engine.EngineRules``).

The run layer runs the checks every engine shares once, and builds the env once, for a new run
(``runs.startup.prepare_new_run``) and a resume (``runs.resume.prepare_resume``); this module adds what only
the RLlib engine knows: its algorithms and options, its settings checked without Ray (:mod:`.checks`), what a
checkpoint's ``policy.pt`` holds and that it holds the config's network (:mod:`.resume`).
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
from retro_atari_kit.integrations.rllib.hyperparams import ALGOS, get_preset, with_overrides
from retro_atari_kit.integrations.rllib.policy import POLICY_FILE

from retro_atari_kit.runs import ENGINE_OPTIONS, RunError, TrainSpec, list_checkpoints, new_config
from retro_atari_kit.runs.engine import EngineRules, SavedPolicy

ENGINE = "rllib"
INSTALL = 'pip install "retro-atari-kit[rllib]"'

__all__ = ["ENGINE", "INSTALL", "RULES", "require_ray"]


def require_ray() -> None:
    """RunError naming the install command if Ray RLlib is not installed."""
    try:
        import ray.rllib  # noqa: F401
    except ImportError as exc:
        raise RunError(f"--engine rllib needs Ray RLlib, which is not installed ({exc}); {INSTALL}") from None


def _resolve(spec: TrainSpec) -> dict[str, Any]:
    """The config of a new RLlib run: preset, ``--set`` and the engine options (``num_env_runners``,
    ``num_envs_per_env_runner``, ``address``: ``auto`` or ``HOST:PORT``, none: a local Ray on the local
    CPUs; ``num_gpus``: learner GPUs)."""
    require_ray()
    if spec.algo not in ALGOS:
        raise RunError(f"unknown algo {spec.algo!r} for --engine rllib; choose one of {', '.join(ALGOS)}")
    if spec.eval_every:
        raise RunError(
            "--eval-every is not available with --engine rllib; run `retrokit eval` on checkpoints"
        )
    if spec.save_replay_buffer:
        raise RunError("--save-replay-buffer is not available with --engine rllib (RLlib checkpoints decide)")
    if ":" in spec.device:  # RLlib places a learner on "a GPU", never on a given one
        raise RunError(f"--device {spec.device}: --engine rllib places its learner itself; use --device cuda")
    options = dict(spec.engine_options)
    unknown = set(options) - set(ENGINE_OPTIONS[ENGINE])
    if unknown:
        raise RunError(f"unknown RLlib option {sorted(unknown)[0]!r}")
    env_kwargs = dict(spec.env_kwargs)
    if spec.backend != "auto":
        env_kwargs["backend"] = spec.backend  # the runners' gym.make_vec gets it with the env kwargs
    hyper = with_overrides(get_preset(spec.algo, spec.preset), spec.overrides)
    if spec.n_envs and not options.get("num_envs_per_env_runner"):
        runners = max(int(options.get("num_env_runners") or 1), 1)
        options["num_envs_per_env_runner"] = -(-int(spec.n_envs) // runners)
    if options.get("num_envs_per_env_runner"):
        hyper["num_envs_per_env_runner"] = int(options["num_envs_per_env_runner"])
    return new_config(
        ENGINE,
        spec.command,
        algo=spec.algo,
        env_id=spec.env_id,
        network=spec.network,
        preset=spec.preset,
        seed=int(spec.seed),
        timesteps=int(spec.timesteps),
        device=spec.device,
        env_kwargs=env_kwargs,
        checkpoint_every=int(spec.checkpoint_every),
        rllib={
            "num_env_runners": options.get("num_env_runners"),
            "address": options.get("address"),
            "num_gpus": options.get("num_gpus"),
        },
        hyperparameters=hyper,
    )


def _check_env(config: dict[str, Any], env: gym.Env, force: bool) -> list[str]:
    """Kinds, ranges, the module and RLlib's ``validate()``, without Ray (a bad ``--set`` fails here, not in
    ``ray.init``); then that ``--address`` is a Ray head."""
    from retro_atari_kit.integrations.rllib.checks import check_settings
    from retro_atari_kit.integrations.rllib.envs import check_address

    check_settings(
        config["algo"],
        config["env_id"],
        config["network"],
        config["hyperparameters"],
        config["env_kwargs"],
        config["rllib"],
        config["device"],
        tuple(env.observation_space.shape),
    )
    check_address(config["rllib"].get("address"))
    return []


def _describe(config: dict[str, Any], run_dir: str) -> list[str]:
    algo, env_id, network = config["algo"], config["env_id"], config["network"]
    return [f"RLlib {algo} on {env_id} ({network} CNN), {config['timesteps']} steps -> {run_dir}"]


def _checkpoints(run_dir: str) -> list[tuple[int, str]]:
    return [c for c in list_checkpoints(run_dir) if os.path.isfile(os.path.join(c[1], POLICY_FILE))]


def _read_checkpoint(path: str) -> SavedPolicy:
    from retro_atari_kit.integrations.rllib.resume import checkpoint_payload

    payload = checkpoint_payload(path)
    return SavedPolicy(
        algo=payload["algo"],
        obs_shape=tuple(payload["obs_shape"]),
        obs_dtype=None,
        n_actions=int(payload["n_actions"]),
    )


def _check_config(config: dict[str, Any], path: str) -> dict[str, Any]:
    require_ray()
    from retro_atari_kit.integrations.rllib.resume import check_resumed_config

    return check_resumed_config(config, path)


def _check_checkpoint(path: str, config: dict[str, Any], module: dict[str, Any]) -> None:
    from retro_atari_kit.integrations.rllib.resume import check_checkpoint_network, checkpoint_payload

    check_checkpoint_network(path, checkpoint_payload(path), module)
    from retro_atari_kit.runs.signatures import check_signed

    check_signed(path)  # before anything of the run is touched; restore() checks again


RULES = EngineRules(
    name=ENGINE,
    resolve=_resolve,
    check_env=_check_env,
    checkpoints=_checkpoints,
    read_checkpoint=_read_checkpoint,
    check_config=_check_config,
    check_checkpoint=_check_checkpoint,
    describe=_describe,
)
