"""What the user asked a training run to be, before an engine resolves it into a config.

:class:`TrainSpec` is the one definition of a training request's settings: each field's default, its kind of
value (which fixes its type and range) and its help text. ``retrokit train`` builds its options from it (as
CleanRL's typed ``Args`` is both the defaults and the command line), so nothing here is restated elsewhere.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from retro_atari_kit.protocols import PROTOCOLS
from retro_atari_kit.runs.engine import ENGINES


@dataclass(frozen=True)
class Option:
    """How one :class:`TrainSpec` field is given on the command line.

    ``kind`` fixes the type and range of the value: ``text``; ``lower`` (text, lowercased); ``steps`` (a step
    count >= 1, ``2e6``, ``500k``, ``2M``); ``count`` (a whole number >= 1); ``every`` (a step count >= 0);
    ``seed`` (a whole number in [0, 2**32 - 1]); ``int`` (any whole number, checked where it is used);
    ``settings`` (``KEY=VALUE`` with dotted keys, repeatable); ``kwargs`` (``NAME=VALUE``, repeatable);
    ``switch`` (a flag).
    ``recorded``: the value is kept in the run's ``config.yaml``, so ``--resume`` refuses it (a resumed run
    goes on with its recorded settings). ``flag`` None: a positional argument.
    """

    flag: str | None
    help: str
    kind: str = "text"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    recorded: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Option {self.flag}: unknown kind {self.kind!r}; one of {', '.join(KINDS)}")


KINDS = ("text", "lower", "steps", "count", "every", "seed", "int", "settings", "kwargs", "switch")
# numpy's legacy seeding (SB3's set_random_seed) and gymnasium's reset take only this range
MAX_SEED = 2**32 - 1


def _option(default: Any = MISSING, *, factory: Any = MISSING, **option: Any) -> Any:
    meta = {"option": Option(**option)}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class TrainSpec:
    """A training request (``retrokit train`` arguments), engine-neutral.

    ``overrides`` are hyperparameter overrides (nested dict, from ``--set``); ``engine_options`` carries
    what only one engine understands (:data:`ENGINE_OPTIONS`, e.g. RLlib's ``num_env_runners``).
    """

    algo: str = _option(flag=None, kind="lower", help="the algorithm")
    env_id: str = _option(flag=None, help="e.g. RetroKit/Pong-v0 (see `retrokit list`)")
    engine: str = _option("sb3", flag="--engine", choices=ENGINES, help="training engine")
    network: str = _option("nature", flag="--network", kind="lower", help="nature or impala")
    timesteps: int = _option(
        1_000_000,
        flag="--timesteps",
        kind="steps",
        recorded=False,
        help="total agent steps, e.g. 2e6 (with --resume: a new total)",
    )
    n_envs: int | None = _option(
        None, flag="--n-envs", kind="count", help="parallel envs (default: CPU count)"
    )
    seed: int = _option(0, flag="--seed", kind="seed", help="random seed")
    device: str = _option("auto", flag="--device", help="auto, cpu, cuda or cuda:N")
    preset: str = _option("default", flag="--preset", help="hyperparameter preset")
    overrides: dict[str, Any] = _option(
        factory=dict,
        flag="--set",
        kind="settings",
        metavar="KEY=VALUE",
        help="override a hyperparameter, e.g. --set n_steps=256 (repeatable; YAML values)",
    )
    env_kwargs: dict[str, Any] = _option(
        factory=dict,
        flag="--env-kwarg",
        kind="kwargs",
        metavar="KEY=VALUE",
        help="env kwarg, e.g. --env-kwarg crop_score=true (repeatable)",
    )
    protocol: str = _option(
        "training",
        flag="--protocol",
        choices=tuple(PROTOCOLS),
        help="the settings of play to train under, as `retrokit eval --protocol` names them: training (the "
        "DeepMind stack), machado (sticky actions 0.25, no life-loss ends, no no-ops; the minimal action "
        "set), nature; recorded, and what `retrokit eval RUN` uses unless told otherwise",
    )
    run_dir: str | None = _option(
        None, flag="--run-dir", help="the run's folder (default: runs/<env>-<algo>-<network>-<seed>-<time>)"
    )
    eval_every: int = _option(0, flag="--eval-every", kind="every", help="evaluate every N steps (0: off)")
    eval_episodes: int = _option(
        5, flag="--eval-episodes", kind="count", help="games per periodic evaluation"
    )
    checkpoint_every: int = _option(
        100_000, flag="--checkpoint-every", kind="every", help="checkpoint every N steps (0: only at the end)"
    )
    save_replay_buffer: bool = _option(
        False,
        flag="--save-replay-buffer",
        kind="switch",
        help="DQN/QR-DQN: also save the replay buffer with checkpoints (large)",
    )
    backend: str = _option(
        "auto", flag="--backend", help="vector backend: auto, native, subprocess or inprocess"
    )
    command: str = ""
    engine_options: dict[str, Any] = field(default_factory=dict)


def spec_options() -> dict[str, tuple[Option, Any]]:
    """``{field name: (its Option, its default)}`` for every :class:`TrainSpec` field given on the command
    line, in declaration order (defaults made by a factory are called)."""
    options = {}
    for f in fields(TrainSpec):
        option = f.metadata.get("option")
        if option is None:
            continue
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        options[f.name] = (option, None if default is MISSING else default)
    return options


# The options only one engine understands (``TrainSpec.engine_options``), by engine: option name -> how it is
# given. The one list: the CLI builds the flags and its checks from it, the engine refuses any other key.
# Data only; no engine is imported here.
ENGINE_OPTION_SPECS: dict[str, dict[str, Option]] = {
    "rllib": {
        "num_env_runners": Option(
            "--num-env-runners",
            "env runner processes (default: the cluster's CPUs minus one)",
            kind="count",
            metavar="N",
        ),
        "num_envs_per_env_runner": Option(
            "--envs-per-runner", "envs per runner, one vector env (default: the preset's)", "count", "K"
        ),
        "address": Option(
            "--address",
            "join a running Ray cluster (default: start a local Ray with this machine's CPUs)",
            metavar="auto|HOST:PORT",
        ),
        "num_gpus": Option("--num-gpus", "GPUs for the learner(s)", kind="int", metavar="G"),
    },
}
# option name -> its flag, by engine
ENGINE_OPTIONS: dict[str, dict[str, str]] = {
    engine: {name: option.flag for name, option in options.items()}
    for engine, options in ENGINE_OPTION_SPECS.items()
}


def option_flag_for_setting(key: str) -> str | None:
    """The ``retrokit train`` flag that owns a ``--set`` key (``seed`` -> ``--seed``, rl-zoo3's
    ``n_timesteps`` -> ``--timesteps``, RLlib's ``num_env_runners`` -> ``--num-env-runners``), or None.
    Such a key in ``--set`` would be ignored or fight the option, so it is refused, naming the flag."""
    name = key.split(".", 1)[0]
    owned = {n: option.flag for n, (option, _) in spec_options().items() if option.flag}
    owned["n_timesteps"] = owned["timesteps"]
    for options in ENGINE_OPTIONS.values():
        owned.update(options)
    return owned.get(name)
