"""True-score evaluation for ``retrokit eval`` and periodic evaluation during training (whole games,
unclipped rewards). Engine-neutral: ``model`` is anything with SB3's ``predict`` signature (an SB3 model,
the RLlib engine's ``KitPolicy``)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from retro_atari_kit.catalog import env_kind
from retro_atari_kit.errors import RunError
from retro_atari_kit.models.seeding import torch_draws_from
from retro_atari_kit.models.threads import playing_threads
from retro_atari_kit.registration import make_env

# called as each game ends: (games ended so far, true score, agent steps of that game)
GameEnded = Callable[[int, float, int], None]


class EvaluationStopped(Exception):
    """A stop request ended an evaluation between two steps, before all its games were played.

    ``scores`` holds the games that had ended: a part of an evaluation, never to be reported as the whole.
    """

    def __init__(self, scores: list[float], episodes: int) -> None:
        super().__init__(f"evaluation stopped after {len(scores)} of {episodes} games")
        self.scores, self.episodes = list(scores), episodes


def check_model_fits(model: Any, env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
    """RunError saying what the model expects when the env's observations or actions differ from those it
    was trained on (another game, another ``frame_stack``): one line before a game is played, instead of a
    shape error or an out-of-range action deep in the first step. Models that name no spaces pass."""
    want_obs = getattr(getattr(model, "observation_space", None), "shape", None)
    want_n = getattr(getattr(model, "action_space", None), "n", None)
    have_obs, have_n = observation_space.shape, getattr(action_space, "n", None)
    if (want_obs is None or tuple(want_obs) == tuple(have_obs)) and (want_n is None or want_n == have_n):
        return
    raise RunError(
        f"the model expects observations of shape {tuple(want_obs or ())} and {want_n} actions, but {env_id} "
        f"with these env kwargs gives {tuple(have_obs)} and {have_n}; use the env and --env-kwarg values "
        "it was trained with"
    )


def _wrapped_chain(model: Any) -> list[Any]:
    """``model`` and the models it wraps (``.model``, as the protocols' wrappers keep theirs)."""
    chain: list[Any] = []
    while model is not None and all(model is not m for m in chain):
        chain.append(model)
        model = getattr(model, "model", None)
    return chain


@contextlib.contextmanager
def seeded_draws(model: Any, seed: int) -> Iterator[None]:
    """Every random draw a model makes while it plays, taken from ``seed``, and given back after.

    A sampling policy draws from torch's generators (:func:`retro_atari_kit.models.seeding.torch_draws_from`);
    SB3's DQN draws its exploration from numpy's global generator and its action space's; other code may use
    Python's ``random``; a wrapper with a generator of its own has a ``seed_draws(seed)`` method, called
    here. All are seeded with ``seed`` inside the block, the global ones restored after it: the same seed
    replays the same actions whatever ran before in the process (a loader that seeds, an earlier
    evaluation), and a training run evaluated between updates keeps the draws it had. The envs' own draws
    (no-ops, sticky actions) come from their ``reset(seed=...)``.
    """
    chain = _wrapped_chain(model)
    spaces: list[gym.Space] = []
    for m in chain:
        space = getattr(m, "action_space", None)
        if isinstance(space, gym.Space) and all(space is not s for s in spaces):
            spaces.append(space)
    # a space's generator is replaced by seed(), never changed in place: keeping the old object restores it
    space_rngs = [getattr(space, "_np_random", None) for space in spaces]
    numpy_state, python_state = np.random.get_state(), random.getstate()
    np.random.seed(seed)
    random.seed(seed)
    for space in spaces:
        space.seed(seed)
    for m in chain:  # a wrapper with a generator of its own (the Nature protocol's epsilon-greedy)
        if callable(getattr(m, "seed_draws", None)):
            m.seed_draws(seed)
    try:
        with torch_draws_from(seed):
            yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
        for space, rng in zip(spaces, space_rngs, strict=True):
            space._np_random = rng


def evaluate_model(
    model: Any,
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = False,
    max_envs: int = 4,
    on_game: GameEnded | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[float]:
    """Play ``episodes`` whole games and return their true scores.

    The score is ``info["episode"]["r"]`` from the kit's true-score wrapper: the sum of unclipped rewards
    over all lives, reported only when the real game ends (life losses do not end an evaluation game).
    Episodes are split evenly over up to ``max_envs`` envs (1 for stable-retro) so short games do not bias
    the mean. ``seed`` is the source of every random draw: env ``i`` starts from ``seed + i`` (no-ops,
    sticky actions), the model's own draws from ``seed`` (:func:`seeded_draws`), so the same model, seed,
    env kwargs and ``max_envs`` play the same games on the same machine.
    ``on_game(k, score, steps)`` is called as the k-th game ends (``retrokit eval`` prints it).
    ``should_stop()`` is asked before every step (a training run's stop request): once true, the envs are
    closed and :class:`EvaluationStopped` is raised, so a stop during a long evaluation takes effect at once.
    torch plays on one thread (:func:`retro_atari_kit.models.threads.playing_threads`: batch-of-a-few
    forwards gain nothing from more, and lose much on shared cores), its count restored after.
    """
    kwargs = dict(env_kwargs or {})
    n = 1 if env_kind(env_id) == "retro" else max(1, min(max_envs, episodes))
    targets = [episodes // n + (1 if i < episodes % n else 0) for i in range(n)]
    envs = [make_env(env_id, **kwargs) for _ in range(n)]
    try:
        check_model_fits(model, env_id, envs[0].observation_space, envs[0].action_space)
        # env i starts from seed + i and resets itself when a game ends, as SB3's vector envs do
        obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
        done_counts = [0] * n
        scores: list[float] = []
        state = None
        starts = np.ones((n,), dtype=bool)
        with playing_threads(), seeded_draws(model, seed):
            while sum(done_counts) < episodes:
                if should_stop is not None and should_stop():
                    raise EvaluationStopped(scores, episodes)
                actions, state = model.predict(
                    obs, state=state, episode_start=starts, deterministic=deterministic
                )
                for i, env in enumerate(envs):
                    obs[i], _, terminated, truncated, info = env.step(actions[i])
                    starts[i] = terminated or truncated
                    if starts[i]:
                        obs[i], _ = env.reset()
                    game = info.get("episode")
                    if game is not None and done_counts[i] < targets[i]:
                        scores.append(float(game["r"]))
                        done_counts[i] += 1
                        if on_game is not None:
                            on_game(len(scores), scores[-1], int(game["l"]))
        return scores
    finally:
        for env in envs:
            env.close()


def summarize(scores: list[float]) -> dict[str, float]:
    """mean, std, min, max, episodes."""
    a = np.asarray(scores, dtype=np.float64)
    return {
        "episodes": int(a.size),
        "mean": float(a.mean()),
        "std": float(a.std()),
        "min": float(a.min()),
        "max": float(a.max()),
    }


def evaluate_model_vector(
    model: Any,
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = False,
    num_envs: int = 4,
    on_game: GameEnded | None = None,
    should_stop: Callable[[], bool] | None = None,
    **vector_kwargs: Any,
) -> list[float]:
    """:func:`evaluate_model` with the envs stepped by the kit's vector backend (``gym.make_vec``: for ALE
    games the native backend's C++ threads, more cores at work on a bigger machine). The first ``episodes``
    games to end are the scores: unlike :func:`evaluate_model`, games are not split evenly over the envs.

    Env ``i`` starts from ``seed + i`` and the model's draws from ``seed``, as in :func:`evaluate_model`
    (the same seed plays the same games); each env is reset inside the step that ends its game
    (``SameStep``), as :func:`evaluate_model` resets its envs; on the native backend the no-op counts and
    sticky-action draws come from ale-py's generator (docs/vectorization.md, "Exactness"), so the games
    differ from :func:`evaluate_model`'s, equally distributed. ``vector_kwargs`` go to ``gym.make_vec``
    (``backend``). ``should_stop`` as in :func:`evaluate_model`: asked before every vector step; once
    true, the vector env is closed and :class:`EvaluationStopped` raised with the games that had ended.
    """
    n = max(1, min(num_envs, episodes))
    venv = gym.make_vec(
        env_id, num_envs=n, autoreset_mode="SameStep", **{**(env_kwargs or {}), **vector_kwargs}
    )
    try:
        check_model_fits(model, env_id, venv.single_observation_space, venv.single_action_space)
        obs, _ = venv.reset(seed=seed)
        scores: list[float] = []
        state = None
        starts = np.ones((n,), dtype=bool)
        with playing_threads(), seeded_draws(model, seed):
            while len(scores) < episodes:
                if should_stop is not None and should_stop():
                    raise EvaluationStopped(scores, episodes)
                actions, state = model.predict(
                    obs, state=state, episode_start=starts, deterministic=deterministic
                )
                obs, _, terminated, truncated, info = venv.step(actions)
                starts = np.logical_or(terminated, truncated)
                ended = info.get("final_info", {}).get("episode")
                mask = info.get("final_info", {}).get("_episode")
                if ended is None or mask is None:
                    continue
                for i in np.flatnonzero(mask):
                    if len(scores) < episodes:
                        scores.append(float(ended["r"][i]))
                        if on_game is not None:
                            on_game(len(scores), scores[-1], int(ended["l"][i]))
        return scores
    finally:
        venv.close()
