"""``algo_config``: a ready RLlib ``AlgorithmConfig`` for a RetroKit env with the kit's module.

::

    import ray
    from retro_atari_kit.integrations.rllib import algo_config

    ray.init()
    algo = algo_config("appo", "RetroKit/Pong-v0", num_env_runners=4).build_algo()
    for _ in range(100):
        result = algo.train()
        print(result["env_runners"].get("true_score_mean"))
"""

from __future__ import annotations

import inspect
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from retro_atari_kit.integrations.rllib.callbacks import TrueScoreCallback
from retro_atari_kit.integrations.rllib.envs import configure_env
from retro_atari_kit.integrations.rllib.hyperparams import ALGOS, get_preset, with_overrides
from retro_atari_kit.integrations.rllib.module import KitRLModule

from retro_atari_kit.models import check_network
from retro_atari_kit.runs import RunError
from retro_atari_kit.wrappers.frame_stack import DEFAULT_FRAME_STACK

# Keys not passed to ``.training()``: where they go instead.
ENV_RUNNER_KEYS = (
    "num_env_runners",
    "num_envs_per_env_runner",
    "rollout_fragment_length",
    "num_cpus_per_env_runner",
    "num_gpus_per_env_runner",
    "sample_timeout_s",
)
LEARNER_KEYS = (
    "num_learners",
    "num_gpus_per_learner",
    "num_cpus_per_learner",
    "num_aggregator_actors_per_learner",
)
MODULE_KEYS = ("channels_last", "encoder_kwargs")
REPORTING_KEYS = ("min_time_s_per_iteration", "min_sample_timesteps_per_iteration")
# DQN settings RLlib passes to the module through its model config (they stay ``.training()`` keys too).
DQN_MODULE_KEYS = ("dueling", "double_q", "epsilon", "num_atoms")

STACKING_BUFFER = "retro_atari_kit.integrations.rllib.stacking.FrameStackEpisodeReplayBuffer"

__all__ = ["ALGOS", "algo_config", "config_class"]


def config_class(algo: str) -> type[AlgorithmConfig]:
    """RLlib's config class for ``ppo``, ``appo``, ``impala`` or ``dqn``."""
    if algo == "ppo":
        from ray.rllib.algorithms.ppo import PPOConfig as cls
    elif algo == "appo":
        from ray.rllib.algorithms.appo import APPOConfig as cls
    elif algo == "impala":
        from ray.rllib.algorithms.impala import IMPALAConfig as cls
    elif algo == "dqn":
        from ray.rllib.algorithms.dqn import DQNConfig as cls
    else:
        raise RunError(f"unknown algo {algo!r} for --engine rllib; choose one of {', '.join(ALGOS)}")
    return cls


def algo_config(
    algo: str, env_id: str, network: str = "nature", preset: str = "default", **overrides: Any
) -> AlgorithmConfig:
    """A ready RLlib config: the RetroKit env on every runner, :class:`KitRLModule`, Atari hyperparameters.

    ``overrides`` replace preset values and may set: ``env_kwargs`` (dict for ``gym.make_vec``),
    ``seed``, runner keys (``num_env_runners``, ``num_envs_per_env_runner``, ``rollout_fragment_length``,
    ...), learner keys (``num_learners``, ``num_gpus_per_learner``, ...), module keys (``channels_last``,
    ``encoder_kwargs``, DQN's ``dueling``), DQN's ``single_frame_replay`` (on in the presets: one frame per
    step in replay, stacked by RLlib connectors, see :mod:`.stacking`), reporting keys
    (``min_time_s_per_iteration``) and any ``.training()`` hyperparameter of the algorithm. PPO's
    ``train_batch_size_per_learner`` defaults to ``rollout_fragment_length x envs`` over all runners (an
    on-policy batch is one rollout of every env). Reward clipping by RLlib is off (the env clips).
    RunError (a ValueError) names a bad key or value.
    """
    algo = algo.lower()
    cls = config_class(algo)
    check_network(network)
    params = with_overrides(get_preset(algo, preset), overrides)
    env_kwargs = params.pop("env_kwargs", None) or {}
    seed = params.pop("seed", None)
    runners = {k: params.pop(k) for k in ENV_RUNNER_KEYS if k in params}
    runners.setdefault("num_env_runners", 1)
    learners = {k: params.pop(k) for k in LEARNER_KEYS if k in params}
    learners.setdefault("num_learners", 0)  # the learner in the driver: no extra process on one machine
    reporting = {k: params.pop(k) for k in REPORTING_KEYS if k in params}
    if params.pop("single_frame_replay", False):
        env_kwargs = _single_frame_replay(algo, params, runners, env_kwargs)
    model = {"network": network, "q_learning": algo == "dqn"}
    model.update({k: params.pop(k) for k in MODULE_KEYS if k in params})
    if algo == "ppo" and "train_batch_size_per_learner" not in params:
        envs = runners.get("num_envs_per_env_runner", 1) * max(runners["num_env_runners"], 1)
        params["train_batch_size_per_learner"] = (
            runners.get("rollout_fragment_length", 128) * envs // max(learners["num_learners"], 1)
        )

    config = cls()
    configure_env(config, env_id, env_kwargs)
    _call(config.env_runners, runners, "runner")
    _call(config.learners, learners, "learner")
    _call(config.training, params, algo)
    if reporting:
        config.reporting(**reporting)
    if seed is not None:
        config.debugging(seed=int(seed))
    config.callbacks(TrueScoreCallback)
    if algo == "dqn":
        model.update({k: getattr(config, k) for k in DQN_MODULE_KEYS})
    config.rl_module(rl_module_spec=RLModuleSpec(module_class=KitRLModule, model_config=model))
    return config


def _single_frame_replay(
    algo: str, params: dict[str, Any], runners: dict[str, Any], env_kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Store one frame per step in DQN's replay and stack in RLlib instead of in the env (see
    :mod:`.stacking`); returns the env kwargs the runners use (``frame_stack=1``)."""
    from retro_atari_kit.integrations.rllib.stacking import StackerFactory

    if algo != "dqn":
        raise RunError(f"single_frame_replay is a DQN setting (replay); {algo} keeps no replay")
    frames = int(env_kwargs.get("frame_stack", DEFAULT_FRAME_STACK))
    buffer = dict(params.get("replay_buffer_config") or {})
    if buffer.get("type", "EpisodeReplayBuffer") not in ("EpisodeReplayBuffer", STACKING_BUFFER):
        raise RunError(
            f"single_frame_replay works with RLlib's EpisodeReplayBuffer, not {buffer['type']!r}; "
            "set single_frame_replay=false to use it"
        )
    # a dotted path, as RLlib wants buffer types (it tests the name for "EpisodeReplayBuffer")
    params["replay_buffer_config"] = {**buffer, "type": STACKING_BUFFER, "frames": frames}
    # the runner keeps frames - 1 past frames when it cuts an episode, so every stack can be built
    runners.update(env_to_module_connector=StackerFactory(frames), episode_lookback_horizon=frames - 1)
    return {**env_kwargs, "frame_stack": 1}


def _call(method: Any, kwargs: dict[str, Any], what: str) -> None:
    """``method(**kwargs)`` with unknown keys reported as one RunError line listing the valid ones."""
    valid: set[str] = set()
    for klass in type(method.__self__).__mro__:  # subclasses pass **kwargs up to AlgorithmConfig's method
        if method.__name__ in vars(klass):
            valid |= set(inspect.signature(vars(klass)[method.__name__]).parameters)
    valid -= {"self", "kwargs"}
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], sorted(valid), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "see RLlib's AlgorithmConfig"
        raise RunError(f"unknown {what} setting {unknown[0]!r}; {hint}")
    try:
        method(**kwargs)
    except (TypeError, ValueError) as exc:
        raise RunError(f"bad {what} setting: {str(exc).strip().splitlines()[0]}") from None
