"""What the user asked a training run to be, before an engine resolves it into a config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The options only one engine understands (``TrainSpec.engine_options``), by engine: option name -> the
# ``retrokit train`` flag that sets it. The one list: the CLI builds its checks from it, the engine refuses
# any other key. Data only; no engine is imported here.
ENGINE_OPTIONS: dict[str, dict[str, str]] = {
    "rllib": {
        "num_env_runners": "--num-env-runners",
        "num_envs_per_env_runner": "--envs-per-runner",
        "address": "--address",
        "num_gpus": "--num-gpus",
    },
}


@dataclass
class TrainSpec:
    """A training request (``retrokit train`` arguments), engine-neutral.

    ``overrides`` are hyperparameter overrides (nested dict, from ``--set``); ``engine_options`` carries
    what only one engine understands (:data:`ENGINE_OPTIONS`, e.g. RLlib's ``num_env_runners``).
    """

    algo: str
    env_id: str
    engine: str = "sb3"
    network: str = "nature"
    timesteps: int = 1_000_000
    n_envs: int | None = None
    seed: int = 0
    device: str = "auto"
    preset: str = "default"
    overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    run_dir: str | None = None
    eval_every: int = 0
    eval_episodes: int = 5
    checkpoint_every: int = 100_000
    save_replay_buffer: bool = False
    backend: str = "auto"
    command: str = ""
    engine_options: dict[str, Any] = field(default_factory=dict)
