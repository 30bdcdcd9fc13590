"""The kit's presets (``retro_atari_kit.presets``, plain data) turned into SB3 constructor arguments.

::

    from stable_baselines3 import PPO
    from retro_atari_kit.integrations.sb3 import make_vec_env
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs

    hp = apply_overrides(get_preset("ppo"), ["n_steps=256", "policy_kwargs.net_arch=[64]"], algo="ppo")
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=hp["n_envs"])
    model = PPO(env=venv, **to_sb3_kwargs(hp, network="impala"))
    model.learn(hp["n_timesteps"])

The preset files name classes by engine-neutral names (``policy: kit-cnn``, ``replay_buffer_class:
compact``, ...): :data:`CLASSES` is the one table that maps them to SB3 classes. A dotted import path
(``--set replay_buffer_class=my_package.buffers.MyBuffer``, or the class paths that older runs' config.yaml
files hold) is imported as it is; SB3's own policy aliases (``CnnPolicy``) stay strings for SB3.

``python -m retro_atari_kit.integrations.sb3.presets`` prints every preset as YAML.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from retro_atari_kit.integrations.sb3.algorithms import constructor_params

from retro_atari_kit import presets as _core
from retro_atari_kit.models import NETWORKS, check_network
from retro_atari_kit.presets import format_preset, get_preset, import_dotted, list_presets

__all__ = [
    "CLASSES",
    "NON_SB3_KEYS",
    "LinearSchedule",
    "apply_overrides",
    "format_preset",
    "get_preset",
    "list_presets",
    "resolve_class",
    "schedule",
    "to_sb3_kwargs",
]

# Keys of a preset that are not SB3 constructor arguments (parallel_play, fast_learner: read by
# training/run.py).
NON_SB3_KEYS = ("n_envs", "n_timesteps", "parallel_play", "fast_learner")
SCHEDULE_KEYS = ("learning_rate", "clip_range", "clip_range_vf", "ent_coef")
# SB3's PPO and A2C take a number for ent_coef; the kit's fast learners (fast_ppo.py) follow a schedule too
FAST_LEARNER_SCHEDULE_KEYS = ("ent_coef",)
CLASS_KEYS = ("replay_buffer_class", "rollout_buffer_class")
POLICY_CLASS_KEYS = ("optimizer_class", "activation_fn", "features_extractor_class")
EXTRACTORS = {name: f"retro_atari_kit.integrations.sb3.extractors.{cls}" for name, cls in NETWORKS.items()}

_KIT = "retro_atari_kit.integrations.sb3"
# The one table from the presets' engine-neutral class names to SB3 classes, per key (imported when used).
CLASSES: dict[str, dict[str, str]] = {
    "policy": {"kit-cnn": f"{_KIT}.policies.KitCnnPolicy", "kit-dqn": f"{_KIT}.policies.KitDQNPolicy"},
    "replay_buffer_class": {"compact": f"{_KIT}.buffers.CompactReplayBuffer"},
    "rollout_buffer_class": {"channels-last": f"{_KIT}.rollout_buffer.ChannelsLastRolloutBuffer"},
    "optimizer_class": {
        "rmsprop-tf-like": "stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike"
    },
}


class LinearSchedule:
    """``initial`` until ``start_fraction`` of training, then linear to ``final`` at the end (picklable,
    unlike a closure). ``start_fraction`` 0 (the default) is rl-zoo3's ``lin_<x>``."""

    start_fraction = 0.0  # schedules pickled in models saved before it existed hold no value of their own

    def __init__(self, initial: float, final: float, start_fraction: float = 0.0) -> None:
        self.initial, self.final, self.start_fraction = initial, final, start_fraction

    def __call__(self, progress_remaining: float) -> float:
        # progress_remaining runs from 1 to 0; the fall takes its last (1 - start_fraction)
        left = min(1.0, progress_remaining / (1.0 - self.start_fraction))
        return self.final + (self.initial - self.final) * left

    def __repr__(self) -> str:
        return f"LinearSchedule({self.initial}, {self.final}, start_fraction={self.start_fraction})"


def _number(text: Any, whole: Any) -> float:
    if isinstance(text, bool):
        raise ValueError(f"cannot read schedule {whole!r}: {text!r} is not a number")
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read schedule {whole!r}: {text!r} is not a number") from None


def schedule(value: Any) -> Any:
    """Turn a preset value into what SB3 expects: ``"lin_X"`` or ``{"schedule": "linear", "initial": X[,
    "final": Y][, "start_fraction": F]}`` -> a callable of SB3's ``progress_remaining`` (1 at the start, 0 at
    the end): X until the fraction F of training (default 0), then linear to Y (default 0) at the end;
    numbers and callables pass through. ValueError for anything else."""
    if callable(value) or value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    if isinstance(value, str):
        if value.startswith("lin_"):
            return LinearSchedule(_number(value[4:], value), 0.0)
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"cannot read schedule {value!r}; use a number or 'lin_<x>'") from None
    if isinstance(value, Mapping):
        keys = set(value)
        if (
            value.get("schedule") != "linear"
            or "initial" not in keys
            or keys - {"schedule", "initial", "final", "start_fraction"}
        ):
            raise ValueError(
                f"cannot read schedule {value!r}; use {{'schedule': 'linear', 'initial': x, 'final': y, "
                "'start_fraction': f}} or 'lin_<x>'"
            )
        start_fraction = _number(value.get("start_fraction", 0.0), value)
        if not 0.0 <= start_fraction < 1.0:
            raise ValueError(f"cannot read schedule {value!r}: start_fraction must be in [0, 1)")
        return LinearSchedule(
            _number(value["initial"], value), _number(value.get("final", 0.0), value), start_fraction
        )
    raise ValueError(
        f"cannot read schedule {value!r}; use a number, 'lin_<x>' or {{'schedule': 'linear', 'initial': x}}"
    )


def resolve_class(key: str, value: Any) -> Any:
    """The class a preset value of ``key`` names: a name of :data:`CLASSES` (``"compact"``) or a dotted
    import path; anything that is not a string passes through. A ``policy`` string that is neither stays a
    string (SB3's aliases such as ``"CnnPolicy"``). PresetError (a ValueError) names the choices otherwise.
    """
    if not isinstance(value, str):
        return value
    names = CLASSES.get(key, {})
    if value in names:
        return import_dotted(names[value])
    if "." in value:
        try:
            return import_dotted(value)
        except _core.PresetError as exc:
            raise _core.PresetError(f"{key}: {exc}") from None
    if key == "policy":
        return value
    choices = "".join(f"{name!r} or " for name in names)
    raise _core.PresetError(
        f"{key}={value!r} is not a class name; use {choices}a dotted path such as my_package.MyClass"
    )


def to_sb3_kwargs(preset: Mapping[str, Any], network: str | None = "nature") -> dict[str, Any]:
    """Constructor kwargs for the SB3 class: drops ``n_envs`` / ``n_timesteps``, turns schedules into
    callables (an ``ent_coef`` schedule only with ``fast_learner`` on: SB3's classes take a number) and
    class names / dotted class paths into classes (:func:`resolve_class`), and sets the kit's extractor
    ``network`` (``"nature"`` or ``"impala"``; None leaves ``policy_kwargs`` as the preset has them, e.g. for
    your own ``features_extractor_class``). Use as ``PPO(env=venv, **to_sb3_kwargs(preset,
    network="impala"))``. A value that cannot be read raises ValueError naming its key."""
    kw = copy.deepcopy(dict(preset))
    for key in NON_SB3_KEYS:
        kw.pop(key, None)
    for key in SCHEDULE_KEYS:
        if key in kw:
            try:
                kw[key] = schedule(kw[key])
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
    for key in FAST_LEARNER_SCHEDULE_KEYS:
        if callable(kw.get(key)) and preset.get("fast_learner") in (None, False):
            raise ValueError(
                f"{key}: SB3's PPO and A2C take a number; a schedule needs the kit's fast learner "
                "(--set fast_learner=true, the same update)"
            )
    for key in CLASS_KEYS:
        if key in kw:
            kw[key] = resolve_class(key, kw[key])
    pk = dict(kw.get("policy_kwargs") or {})
    if network is not None:
        check_network(network)
        pk["features_extractor_class"] = EXTRACTORS[network]
    for key in POLICY_CLASS_KEYS:
        if key in pk:
            pk[key] = resolve_class(key, pk[key])
    if pk or "policy_kwargs" in kw:
        kw["policy_kwargs"] = pk
    _route_n_steps(kw)
    kw["policy"] = resolve_class("policy", kw.get("policy", "CnnPolicy"))
    return kw


def _route_n_steps(kw: dict[str, Any]) -> None:
    """DQN's ``n_steps`` > 1 with the preset's own ``replay_buffer_class``: SB3 sets n-step returns up only
    for its default buffer and ignores ``n_steps`` (with a warning) otherwise, so hand ``n_steps`` and
    ``gamma`` to the buffer, which computes the n-step samples."""
    n_steps = kw.get("n_steps", 1)
    if "replay_buffer_class" not in kw or n_steps == 1:
        return
    buffer_kwargs = dict(kw.get("replay_buffer_kwargs") or {})
    buffer_kwargs.setdefault("n_steps", kw.pop("n_steps"))
    buffer_kwargs.setdefault("gamma", kw.get("gamma", 0.99))
    kw["replay_buffer_kwargs"] = buffer_kwargs


def allowed_keys(algo: str | None, preset: Mapping[str, Any]) -> set[str]:
    """Top-level keys an override may set: the preset's, ``n_envs`` / ``n_timesteps`` / ``policy`` /
    ``policy_kwargs``, and (with ``algo``) every constructor argument of that SB3 class."""
    allowed = set(preset) | set(NON_SB3_KEYS) | {"policy", "policy_kwargs"}
    return allowed if algo is None else allowed | set(constructor_params(algo))


def apply_overrides(
    preset: Mapping[str, Any], overrides: Mapping[str, Any] | Iterable[str], algo: str | None = None
) -> dict[str, Any]:
    """A new preset with ``overrides`` (a dict or ``["key=value", ...]``, YAML values, dotted keys reach
    into nested dicts) applied key by key. With ``algo``, a top-level key must be a constructor argument
    of that SB3 class (or a preset key); otherwise ValueError names the closest allowed one."""
    items = overrides if isinstance(overrides, Mapping) else _core.parse_overrides(overrides)
    return _core.apply_overrides(preset, items, allowed=allowed_keys(algo, preset))


def _main() -> None:
    for algo, names in list_presets().items():
        for name in names:
            print(f"# {algo} / {name}: {_core.preset_description(algo, name)}")
            print(format_preset(get_preset(algo, name)))
