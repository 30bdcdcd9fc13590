"""The valid range of the common hyperparameters, checked on ``--set`` values before a run starts.

A value outside its range trains without an error and silently to nothing (``gamma=2`` makes the returns
grow without bound, then inf / nan); neither SB3 nor RLlib checks it. The names cover both engines (SB3's
``learning_rate``, ``gae_lambda``, ...; RLlib's ``lr``, ``lambda_``, ...). Only numbers are judged here
(and the numbers of a linear schedule, ``lin_<x>`` or ``{schedule: linear, initial: x, final: y}``); a value
of the wrong type is the engine's check.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from retro_atari_kit.errors import RunError

# name -> (low, low included, high, high included); None: unbounded on that side
Range = tuple[float | None, bool, float | None, bool]

UNIT = (0.0, True, 1.0, True)  # [0, 1]
POSITIVE = (0.0, False, None, False)  # (0, inf)
NON_NEGATIVE = (0.0, True, None, False)  # [0, inf)
AT_LEAST_ONE = (1.0, True, None, False)  # [1, inf)

RANGES: dict[str, Range] = {
    "gamma": (0.0, False, 1.0, True),
    "tau": (0.0, False, 1.0, True),
    "gae_lambda": UNIT,
    "lambda_": UNIT,
    "lambda": UNIT,
    "learning_rate": POSITIVE,
    "lr": POSITIVE,
    "clip_range": POSITIVE,
    "clip_range_vf": POSITIVE,
    "clip_param": POSITIVE,
    "vf_clip_param": POSITIVE,
    "target_kl": POSITIVE,
    "max_grad_norm": POSITIVE,
    "grad_clip": POSITIVE,
    "ent_coef": NON_NEGATIVE,
    "entropy_coeff": NON_NEGATIVE,
    "vf_coef": NON_NEGATIVE,
    "vf_loss_coeff": NON_NEGATIVE,
    "exploration_fraction": UNIT,
    "exploration_initial_eps": UNIT,
    "exploration_final_eps": UNIT,
    "learning_starts": NON_NEGATIVE,
    "num_steps_sampled_before_learning_starts": NON_NEGATIVE,
    "n_steps": AT_LEAST_ONE,
    "n_step": AT_LEAST_ONE,
    "batch_size": AT_LEAST_ONE,
    "n_epochs": AT_LEAST_ONE,
    "num_epochs": AT_LEAST_ONE,
    "minibatch_size": AT_LEAST_ONE,
    "train_batch_size_per_learner": AT_LEAST_ONE,
    "rollout_fragment_length": AT_LEAST_ONE,
    "buffer_size": AT_LEAST_ONE,
    "target_update_interval": AT_LEAST_ONE,
    "train_freq": AT_LEAST_ONE,
    "target_network_update_freq": AT_LEAST_ONE,
    "n_quantiles": AT_LEAST_ONE,
    "frame_stack": AT_LEAST_ONE,
    "n_envs": AT_LEAST_ONE,
    "num_envs_per_env_runner": AT_LEAST_ONE,
    # RLlib's names (integrations/rllib checks their kinds; presets/engines/rllib.yaml)
    "epsilon": UNIT,
    "training_intensity": POSITIVE,
    "kl_coeff": NON_NEGATIVE,
    "kl_target": POSITIVE,
    "vtrace_clip_rho_threshold": POSITIVE,
    "vtrace_clip_pg_rho_threshold": POSITIVE,
    "circular_buffer_num_batches": AT_LEAST_ONE,
    "circular_buffer_iterations_per_batch": AT_LEAST_ONE,
    "broadcast_interval": AT_LEAST_ONE,
    "learner_queue_size": AT_LEAST_ONE,
    "train_batch_size": AT_LEAST_ONE,
    "num_atoms": AT_LEAST_ONE,
    "replay_buffer_config.capacity": AT_LEAST_ONE,
    "min_time_s_per_iteration": NON_NEGATIVE,
    "min_sample_timesteps_per_iteration": NON_NEGATIVE,
    "sample_timeout_s": POSITIVE,
    "num_env_runners": NON_NEGATIVE,
    "num_learners": NON_NEGATIVE,
    "num_aggregator_actors_per_learner": NON_NEGATIVE,
    "num_cpus_per_env_runner": NON_NEGATIVE,
    "num_gpus_per_env_runner": NON_NEGATIVE,
    "num_cpus_per_learner": NON_NEGATIVE,
    "num_gpus_per_learner": NON_NEGATIVE,
}

__all__ = ["RANGES", "check_range", "check_ranges"]


def _schedule(value: Any) -> bool:
    """RLlib's schedule ``[[timestep, value], ...]`` (``lr``, ``entropy_coeff``, ``epsilon``)."""
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(p, (list, tuple)) and len(p) == 2 and not isinstance(p[1], str) for p in value)
    )


def _number(value: Any) -> float | None:
    """The number a value stands for (``lin_2.5e-4`` -> 2.5e-4, ``[4, step]`` -> 4), or None."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy's bool is no number either
        return None
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[1], str):
        return _number(value[0])  # SB3's train_freq=[4, step]: the count is what must be in range
    if isinstance(value, numbers.Real):  # numpy numbers too (np.int64(0) is judged as 0)
        return float(value)
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            return float(value[4:])
        except ValueError:
            return None
    return None


def _describe(r: Range) -> str:
    low, low_in, high, high_in = r
    if high is None:
        return f"{'>=' if low_in else '>'} {low:g}"
    return f"in {'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"


def check_range(key: str, value: Any) -> None:
    """RunError naming ``key`` and its range when ``value`` is a number outside it."""
    r = RANGES.get(key)
    if r is None:
        return
    if _schedule(value):  # every value of the schedule must be in range
        for _, v in value:
            x = _number(v)
            if x is not None and not _inside(x, r):
                raise RunError(f"--set {key}={value}: {key} must be {_describe(r)} (here {v})")
        return
    x = _number(value)
    if x is not None and not _inside(x, r):
        raise RunError(f"--set {key}={value}: {key} must be {_describe(r)}")


def _inside(x: float, r: Range) -> bool:
    low, low_in, high, high_in = r
    ok = math.isfinite(x)
    ok = ok and (low is None or x > low or (low_in and x == low))
    return ok and (high is None or x < high or (high_in and x == high))


def check_ranges(overrides: dict[str, Any]) -> None:
    """:func:`check_range` on every ``--set`` value; a mapping's values by their dotted names
    (``replay_buffer_config={capacity: 0}`` is checked as ``replay_buffer_config.capacity``)."""
    for key, value in overrides.items():
        base, _, end = key.rpartition(".")
        if isinstance(value, dict) and "schedule" in value:  # a linear schedule {initial: x, final: y}
            _check_schedule(key, value)
        elif end in ("initial", "final") and base in RANGES:  # one end of it: --set learning_rate.initial=x
            _check_schedule(base, {end: value})
        elif isinstance(value, dict):
            check_ranges({f"{key}.{k}": v for k, v in value.items()})
        else:
            check_range(key, value)


def _check_schedule(key: str, value: dict[str, Any]) -> None:
    """The ends of a linear schedule: ``initial`` in the key's range, ``final`` there or at its lower bound
    (a schedule may fall to 0, as ``lin_<x>`` does, where the key itself must be > 0)."""
    r = RANGES.get(key)
    if r is None:
        return
    low, _, high, high_in = r
    for end, bounds in (("initial", r), ("final", (low, True, high, high_in))):
        x = _number(value.get(end))
        if x is not None and not _inside(x, bounds):
            raise RunError(f"--set {key}={value}: its {end} value must be {_describe(bounds)}")
