"""``parallel_play_class(DQN)``: SB3's off-policy loop with the env play moved to its own process.

SB3's ``learn()`` loop is kept as it is (collect ``train_freq`` steps, then ``gradient_steps`` updates, the
same conditions on ``learning_starts``); only ``collect_rollouts`` changes: instead of stepping the envs it
takes the next ``train_freq`` steps the player already took and does with them exactly what SB3 does with
its own steps (callbacks per step, episode records, replay ``add``, progress, target sync and epsilon in
``_on_step``, log dumps). The updates therefore happen at the same agent steps as in the synchronous loop.

The sync rule: at the start of every rollout the trainer allows the player to reach the end of that rollout
plus ``ahead`` vector steps (never past the last rollout of ``learn()``). While the trainer runs the updates
of rollout ``r``, the player plays up to ``ahead`` steps of rollout ``r + 1``; it can never run further ahead,
so the number of updates per env step is the synchronous one and the acting network is at most ``ahead``
steps (plus the weight-refresh interval) older than in the synchronous loop.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from stable_baselines3.common.type_aliases import RolloutReturn, TrainFrequencyUnit

from retro_atari_kit.errors import as_int
from retro_atari_kit.models.threads import learner_threads

from .venv import PlayProcessVecEnv

OPTION_KEYS = ("ahead", "weights_every", "trainer_threads", "when")
# ``when``: "cuda" (default) plays in a process of its own only when the learner is on a CUDA device, where
# the update leaves the CPU free for play; on a CPU learner the update itself takes the cores play would
# need, so the run trains synchronously with the same schedule. "always" plays in parallel on any device.
WHEN = ("cuda", "always")


def parse_options(options: Mapping[str, Any] | bool | None) -> dict[str, Any]:
    """Validate the ``parallel_play`` preset value: ``true`` or ``{ahead: int >= 0 | null, weights_every:
    int >= 1 | null, trainer_threads: int >= 1 | null, when: cuda | always}``. ``ahead``: vector steps play
    may run ahead of the synchronous schedule (null: one rollout, ``train_freq``). ``weights_every``: agent
    steps between weight refreshes (null: after every round of updates). ``trainer_threads``: torch threads
    of the trainer (null: leave one core to the player, see :func:`_trainer_threads`). ``when``: see
    :data:`WHEN` and :func:`play_pays`. Raises ``ValueError`` naming the bad key or value."""
    if options is True or options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise ValueError(
            f"parallel_play must be true or a mapping with keys {', '.join(OPTION_KEYS)}, got {options!r}"
        )
    bad = sorted(set(options) - set(OPTION_KEYS))
    if bad:
        raise ValueError(f"unknown parallel_play option {bad[0]!r}; use {', '.join(OPTION_KEYS)}")
    out: dict[str, Any] = {}
    for key, low in (("ahead", 0), ("weights_every", 1), ("trainer_threads", 1)):
        value = options.get(key)
        number = None if value is None else as_int(value)  # numpy integers too
        if value is not None and (number is None or number < low):
            raise ValueError(f"parallel_play.{key} must be an int >= {low} or null, got {value!r}")
        out[key] = number
    out["when"] = WHEN[0] if options.get("when") is None else options["when"]
    if out["when"] not in WHEN:
        raise ValueError(f"parallel_play.when must be {' or '.join(WHEN)}, got {options['when']!r}")
    return out


def play_pays(options: Mapping[str, Any] | bool | None, device: str) -> bool:
    """Whether a run with these ``parallel_play`` options on learner ``device`` (``auto``, ``cpu``,
    ``cuda[:N]``) plays in a process of its own: always with ``when: always``; by default only for a CUDA
    learner (``auto`` picks CUDA when torch sees a GPU, as SB3 does)."""
    if not options:
        return False
    if parse_options(options)["when"] == "always":
        return True
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return str(device).startswith("cuda")


def _trainer_threads(threads: int | None) -> None:
    """Set the trainer's torch threads: ``threads``, or by default the kit's rule
    (:mod:`retro_atari_kit.models.threads`) with the play process as the one env worker: at most
    cores - 1, leaving the player a core. torch's OpenMP threads wait for each other by spinning, so more
    busy threads than cores make updates many times slower when another busy process (the player) shares
    the cores (docs/performance.md has the measurements)."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
        return
    learner_threads(workers=1)


class ParallelPlayMixin:
    """Mixed in before DQN / QRDQN by :func:`parallel_play_class`; see the module docstring."""

    play_options: dict[str, Any] = {"ahead": None, "weights_every": None, "trainer_threads": None}

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "play_trace"]  # type: ignore[misc]

    # -- helpers ---------------------------------------------------------------------------------------
    def _acting_net(self) -> Any:
        policy = self.policy  # type: ignore[attr-defined]
        return policy.q_net if hasattr(policy, "q_net") else policy.quantile_net

    def _play_env(self) -> PlayProcessVecEnv:
        env = self.env  # type: ignore[attr-defined]
        if not isinstance(env, PlayProcessVecEnv):
            raise TypeError(
                f"{type(self).__name__} needs the env made by make_play_env(...), got "
                f"{type(env).__name__}; use the plain algorithm with make_vec_env otherwise"
            )
        return env

    @property
    def play_ahead(self) -> int:
        """Vector steps the player may run ahead of the synchronous schedule."""
        ahead = self.play_options["ahead"]
        return self.train_freq.frequency if ahead is None else ahead  # type: ignore[attr-defined]

    # -- SB3 hooks -----------------------------------------------------------------------------------
    def _setup_learn(self, *args: Any, **kwargs: Any) -> Any:
        env = self._play_env()
        out = super()._setup_learn(*args, **kwargs)  # type: ignore[misc]  (resets the envs if needed)
        if self.train_freq.unit != TrainFrequencyUnit.STEP:  # type: ignore[attr-defined]
            raise ValueError("parallel play needs train_freq in steps, not episodes")
        if getattr(self, "_vec_normalize_env", None) is not None:
            raise ValueError("parallel play does not support VecNormalize")
        _trainer_threads(self.play_options.get("trainer_threads"))
        if not hasattr(self, "play_trace"):
            # (consumed, produced) vector steps at every round of updates: how far play ran ahead
            self.play_trace: collections.deque = collections.deque(maxlen=100_000)
        self._weights_at = self.num_timesteps  # type: ignore[attr-defined]
        params: dict[str, Any] = {
            "timesteps": self.num_timesteps,  # type: ignore[attr-defined]
            "produced": env.consumed,  # the next step the trainer takes is played at num_timesteps
            "learning_starts": self.learning_starts,  # type: ignore[attr-defined]
            "eps": self.exploration_rate,  # type: ignore[attr-defined]
            "schedule": self.exploration_schedule,  # type: ignore[attr-defined]
            "total": self._total_timesteps,  # type: ignore[attr-defined]
        }
        if not env.network_shared:
            # first learn(): the network once, then the player continues the trainer's RNG streams, so a
            # fixed seed gives the synchronous loop's actions (the trainer's own np.random then only samples)
            params.update(env.share_network(self._acting_net()))
            params["np_random"] = np.random.get_state()
            params["action_space"] = self.action_space  # type: ignore[attr-defined]
        else:
            env.publish_weights(self._acting_net())  # a loaded model or weights changed between learn() calls
        env.start_play(params)
        return out

    def collect_rollouts(
        self,
        env: Any,
        callback: Any,
        train_freq: Any,
        replay_buffer: Any,
        action_noise: Any = None,
        learning_starts: int = 0,
        log_interval: int | None = None,
    ) -> RolloutReturn:
        """Take ``train_freq`` steps from the player and process them as SB3's ``collect_rollouts`` does."""
        self.policy.set_training_mode(False)  # type: ignore[attr-defined]
        n, steps = env.num_envs, train_freq.frequency
        # vector steps until SB3's loop stops (it ends the rollout in which num_timesteps reaches the total)
        left = math.ceil((self._total_timesteps - self.num_timesteps) / n)  # type: ignore[attr-defined]
        last = max(1, math.ceil(left / steps)) * steps
        env.allow(env.consumed + min(steps + self.play_ahead, last))
        collected = episodes = 0
        callback.on_rollout_start()
        while collected < steps:
            actions, new_obs, rewards, dones, infos = env.recv_step()
            buffer_actions = actions  # noqa: F841  (as SB3: seen by callbacks through locals())
            self.num_timesteps += n  # type: ignore[attr-defined]
            collected += 1
            callback.update_locals(locals())
            if not callback.on_step():
                return RolloutReturn(collected * n, episodes, continue_training=False)
            self._update_info_buffer(infos, dones)  # type: ignore[attr-defined]
            self._store_transition(replay_buffer, actions, new_obs, rewards, dones, infos)  # type: ignore[attr-defined]
            self._update_current_progress_remaining(self.num_timesteps, self._total_timesteps)  # type: ignore[attr-defined]
            self._on_step()  # type: ignore[attr-defined]  (DQN: target sync, epsilon)
            for done in dones:
                if done:
                    episodes += 1
                    self._episode_num += 1  # type: ignore[attr-defined]
                    if log_interval is not None and self._episode_num % log_interval == 0:  # type: ignore[attr-defined]
                        self.dump_logs()  # type: ignore[attr-defined]
        callback.on_rollout_end()
        return RolloutReturn(collected * n, episodes, continue_training=True)

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        env = self._play_env()
        self.play_trace.append((env.consumed, env.produced))
        super().train(gradient_steps, batch_size)  # type: ignore[misc]
        every = self.play_options["weights_every"]
        if every is None or self.num_timesteps - self._weights_at >= every:  # type: ignore[attr-defined]
            env.publish_weights(self._acting_net())
            self._weights_at = self.num_timesteps  # type: ignore[attr-defined]


def parallel_play_class(base: type, options: Mapping[str, Any] | bool | None = None) -> type:
    """``base`` (SB3's ``DQN`` or sb3-contrib's ``QRDQN``, or a subclass) with env play in its own process.

    Use it with the env from :func:`make_play_env`::

        from stable_baselines3 import DQN
        from retro_atari_kit.integrations.sb3.parallel_play import make_play_env, parallel_play_class
        venv = make_play_env("RetroKit/Pong-v0", n_envs=1, seed=0)
        model = parallel_play_class(DQN)("CnnPolicy", venv, train_freq=4, batch_size=128)
        model.learn(1_000_000)
        venv.close()

    Same constructor, ``save`` / ``load`` (files are interchangeable with ``base``'s) and hyperparameters.
    ``options``: see :func:`parse_options`.
    """
    opts = parse_options(options)
    if not isinstance(base, type) or not any(c.__name__ in ("DQN", "QRDQN") for c in base.__mro__):
        raise TypeError(
            f"parallel_play_class needs DQN or QRDQN (epsilon-greedy Q-learning), got "
            f"{getattr(base, '__name__', base)!r}"
        )
    return type(
        f"ParallelPlay{base.__name__}",
        (ParallelPlayMixin, base),
        {"play_options": opts, "__module__": __name__},
    )


def check_parallel_play(algo: str, options: Mapping[str, Any] | bool | None) -> None:
    """Raise ``ValueError`` (one line) unless ``options`` are valid ``parallel_play`` options for ``algo``."""
    if algo not in ("dqn", "qrdqn"):
        raise ValueError(f"parallel_play is for dqn and qrdqn (epsilon-greedy Q-learning), not {algo}")
    parse_options(options)


def active_play_options(config: Mapping[str, Any], out: Callable[[str], None] = print) -> Any:
    """For ``retrokit train``: the run's ``parallel_play`` options if it plays in a process of its own on
    its device (:func:`play_pays`), else None, saying so in one line when the preset asked for it."""
    options = config["hyperparams"].get("parallel_play")
    if not options or play_pays(options, config["device"]):
        return options or None
    hp = config["hyperparams"]
    out(
        f"parallel_play: off, the learner is not on a CUDA device (play in its own process pays only "
        f"there); training synchronously with the same schedule (train_freq {hp.get('train_freq')}, "
        f"batch {hp.get('batch_size')}); --set parallel_play.when=always plays in parallel anyway"
    )
    return None


def play_class_and_env(
    base: type,
    options: Mapping[str, Any] | bool | None,
    config: Mapping[str, Any],
    monitor_dir: str | None,
    seed: int,
) -> tuple[type, PlayProcessVecEnv]:
    """For ``retrokit train``: the parallel-play class of ``base`` and its play env for a run's config
    (``env_id``, ``n_envs``, ``backend``, ``env_kwargs``); see :func:`active_play_options` for when."""
    cls = parallel_play_class(base, options)
    venv = PlayProcessVecEnv(
        config["env_id"],
        n_envs=config["n_envs"],
        seed=seed,
        backend=config.get("backend", "auto"),
        monitor_dir=monitor_dir,
        **config["env_kwargs"],
    )
    return cls, venv
