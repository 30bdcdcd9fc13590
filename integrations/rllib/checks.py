"""The RLlib settings of a run, checked before Ray starts: a bad ``--set`` costs no Ray start-up and leaves no
run dir.

RLlib's ``.training()`` / ``.env_runners()`` take any value; a wrong type or an out-of-range number fails
only once Ray runs (in a learner, a runner, the module) or trains silently to nothing. So, in order:

1. kinds: each setting the kit knows (its presets' keys and RLlib's common ones) has a kind (whole number,
   number, schedule, true/false, mapping, text);
2. ranges: ``retro_atari_kit.presets.ranges`` (both engines' names), inside schedules and mappings too;
3. the kit's module: ``encoder_kwargs`` build the CNN, DQN's ``num_atoms`` is 1;
4. RLlib's own ``AlgorithmConfig.validate()`` (batch sizes that do not fit, unknown loss names, schedules),
   on the config ``train`` will build: the same env runners and learners (``runner_settings``). With
   ``--address`` and no ``--num-env-runners`` the runner count is the cluster's, known only once connected:
   then step 4 runs in ``train``, before the algorithm is built.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from retro_atari_kit.presets.ranges import check_ranges
from retro_atari_kit.runs import RunError

# setting -> kind; "int": a whole number, "number": int or float, "schedule": a number or RLlib's
# [[timestep, value], ...], "bool", "dict", "str" (whose values RLlib checks)
KINDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "num_env_runners",
            "num_envs_per_env_runner",
            "rollout_fragment_length",
            "train_batch_size",
            "train_batch_size_per_learner",
            "minibatch_size",
            "num_epochs",
            "num_learners",
            "num_aggregator_actors_per_learner",
            "num_steps_sampled_before_learning_starts",
            "target_network_update_freq",
            "circular_buffer_num_batches",
            "circular_buffer_iterations_per_batch",
            "broadcast_interval",
            "learner_queue_size",
            "num_atoms",
            "n_step",
            "replay_buffer_config.capacity",
        ),
        "int",
    ),
    **dict.fromkeys(
        (
            "gamma",
            "lambda_",
            "clip_param",
            "vf_clip_param",
            "vf_loss_coeff",
            "grad_clip",
            "tau",
            "training_intensity",
            "kl_coeff",
            "kl_target",
            "min_time_s_per_iteration",
            "min_sample_timesteps_per_iteration",
            "sample_timeout_s",
            "num_cpus_per_env_runner",
            "num_gpus_per_env_runner",
            "num_cpus_per_learner",
            "num_gpus_per_learner",
            "vtrace_clip_rho_threshold",
            "vtrace_clip_pg_rho_threshold",
        ),
        "number",
    ),
    **dict.fromkeys(("lr", "entropy_coeff", "epsilon"), "schedule"),
    **dict.fromkeys(
        ("use_kl_loss", "use_critic", "use_gae", "vtrace", "dueling", "double_q"),
        "bool",
    ),
    **dict.fromkeys(("single_frame_replay", "channels_last"), "bool"),  # the kit's own
    **dict.fromkeys(("replay_buffer_config", "encoder_kwargs"), "dict"),
    **dict.fromkeys(("grad_clip_by", "td_error_loss_fn"), "str"),
}
# RLlib's defaults that are not of the kind: None (off / unbounded) and "auto"
OPTIONAL = {"grad_clip", "training_intensity", "sample_timeout_s", "kl_target", "minibatch_size"}
OPTIONAL |= {"min_time_s_per_iteration", "min_sample_timesteps_per_iteration", "train_batch_size_per_learner"}
AUTO = {"rollout_fragment_length", "num_cpus_per_learner"}
# settings a flag of `retrokit train` sets (train would replace a --set value)
FLAGS = {"num_env_runners": "--num-env-runners"}
_WORDS = {
    "int": "a whole number",
    "number": "a number",
    "schedule": "a number or a schedule [[timestep, value], ...]",
    "bool": "true or false",
    "dict": "a mapping {key: value, ...}",
    "str": "a name",
}

__all__ = ["KINDS", "check_kinds", "check_settings", "quiet_rllib", "runner_settings", "validate"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fits(kind: str, key: str, value: Any) -> bool:
    if (value is None and key in OPTIONAL) or (value == "auto" and key in AUTO):
        return True
    if kind == "int":  # DQN's n_step may be a range [low, high], sampled per batch
        pair = key == "n_step" and isinstance(value, list) and len(value) == 2
        return _is_int(value) or (pair and all(_is_int(v) for v in value))
    if kind == "number":
        return _is_number(value)
    if kind == "schedule":
        pairs = isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value)
        return _is_number(value) or (pairs and all(_is_number(t) and _is_number(v) for t, v in value))
    return isinstance(value, {"bool": bool, "dict": dict, "str": str}[kind])


def check_kinds(hyper: dict[str, Any], prefix: str = "") -> None:
    """RunError naming the first setting of ``hyper`` whose value is not of its kind (:data:`KINDS`; a
    mapping's values by dotted name). A whole number written as a float (``1e5``) becomes an int, in place:
    RLlib counts with it."""
    for key, value in hyper.items():
        name = prefix + str(key)
        kind = KINDS.get(name)
        if kind == "int" and isinstance(value, float) and value.is_integer():
            hyper[key] = value = int(value)
        if kind is not None and not _fits(kind, name, value):
            raise RunError(f"--set {name}={value!r}: {name} must be {_WORDS[kind]}")
        if isinstance(value, dict):
            check_kinds(value, prefix=f"{name}.")


def runner_settings(options: dict[str, Any], device: Any, cluster_cpus: int | None) -> dict[str, Any] | None:
    """The env runner / learner settings ``train`` adds to the hyperparameters: ``num_env_runners`` (unset:
    the cluster's CPUs minus one, the driver's) and one learner per GPU. None when the runner count
    depends on a cluster not yet connected (``cluster_cpus`` None)."""
    runners = options.get("num_env_runners")
    if runners is None:
        if cluster_cpus is None:
            return None
        runners = max(int(cluster_cpus) - 1, 1)
    gpus = options.get("num_gpus")
    if gpus is None:
        gpus = 1 if str(device).startswith("cuda") else 0
    out: dict[str, Any] = {"num_env_runners": int(runners)}
    if gpus:
        # one learner per GPU; a single one stays in the driver process
        out.update(num_learners=int(gpus) if gpus > 1 else 0, num_gpus_per_learner=1)
    return out


def validate(rl_config: Any) -> None:
    """RLlib's own ``validate()`` of a built config (no Ray needed), its complaint as one RunError line.

    RLlib's warnings meanwhile (``You are running PPO on the new API stack!``) are held back: they would
    print before a refusal's one line."""
    with quiet_rllib():
        try:
            rl_config.validate()
        except (TypeError, ValueError, KeyError) as exc:
            text = str(exc).strip().splitlines()
            raise RunError(f"RLlib refuses the settings: {text[0] if text else type(exc).__name__}") from None


@contextlib.contextmanager
def quiet_rllib() -> Iterator[None]:
    """Ray's warnings held back while the settings are checked (RLlib's, and the deprecation warnings that
    importing an algorithm's modules logs through ``ray._common``): every logger, for this block only."""
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(before)


def _check_module(network: str, obs_shape: tuple[int, ...], hyper: dict[str, Any]) -> None:
    """The kit's module for these settings can be built (its CNN on the CPU, a few ms)."""
    from retro_atari_kit.integrations.rllib.nets import build_encoder

    if hyper.get("num_atoms", 1) != 1:
        atoms = hyper["num_atoms"]
        raise RunError(f"--set num_atoms={atoms}: the kit's DQN module is not distributional; use 1")
    kwargs = hyper.get("encoder_kwargs") or {}
    try:
        build_encoder(network, obs_shape, bool(hyper.get("channels_last", True)), **kwargs)
    except (TypeError, ValueError, RuntimeError) as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RunError(f"--set encoder_kwargs={kwargs}: the {network} CNN cannot take them: {text}") from None


def _check_local_gpus(hyper: dict[str, Any]) -> None:
    from retro_atari_kit.models import cuda_devices

    for key in ("num_gpus_per_learner", "num_gpus_per_env_runner"):
        if _is_number(hyper.get(key)) and hyper[key] > 0 and cuda_devices()[0] == 0:
            raise RunError(
                f"--set {key}={hyper[key]}: no CUDA GPU is usable here; drop it (--num-gpus G gives the "
                "learners GPUs where there are some)"
            )


def check_settings(
    algo: str,
    env_id: str,
    network: str,
    hyper: dict[str, Any],
    env_kwargs: dict[str, Any],
    options: dict[str, Any],
    device: Any,
    obs_shape: tuple[int, ...] | None = None,
) -> Any:
    """Steps 1-4 of this module on the resolved hyperparameters ``hyper`` of a run (preset and ``--set``);
    returns the RLlib config, built without Ray. ``options`` are the run's RLlib options (``address``,
    ``num_env_runners``, ``num_gpus``); ``obs_shape`` None skips the module check."""
    from retro_atari_kit.integrations.rllib.config import algo_config

    for key, flag in FLAGS.items():
        if key in hyper:
            raise RunError(f"--set {key}: use {flag} (train sets it from that flag)")
    check_kinds(hyper)
    check_ranges(hyper)
    if obs_shape is not None:
        _check_module(network, obs_shape, hyper)
    local_cpus = None if options.get("address") else os.cpu_count() or 1  # what train's ray.init gets
    if local_cpus is not None:  # a local Ray has the local GPUs only; RLlib fails later
        _check_local_gpus(hyper)
    settings = runner_settings(options, device, local_cpus)
    with quiet_rllib():  # importing an algorithm's modules logs Ray's deprecation warnings
        rl_config = algo_config(algo, env_id, network, **{**hyper, **(settings or {})}, env_kwargs=env_kwargs)
    if settings is not None:
        validate(rl_config)
    return rl_config
