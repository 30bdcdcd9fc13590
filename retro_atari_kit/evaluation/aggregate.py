"""Aggregate scores over runs and games with uncertainty, computed by ``rliable`` (Agarwal et al. 2021).

Every function takes score matrices of shape ``(runs, games)``: one number per run and game (its mean
evaluation score, usually human-normalised). The intervals are rliable's stratified bootstrap (runs
resampled within each game), which calls the metric once per resample. The point estimates are rliable's
metrics; the three whose rliable form goes through a per-call wrapper (the IQM and the probability of
improvement through scipy's argument checks, the score distribution through ``np.vectorize``) are computed
here the same way in plain numpy, to the bit (tests/core/test_evaluation_aggregates.py): that wrapper was
most of a report's time (docs/evaluation.md). ``rliable`` is the ``eval`` extra:
``pip install "retro-atari-kit[eval]"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np

from retro_atari_kit.errors import RunError

METRICS = ("IQM", "median", "mean", "optimality_gap")


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """numpy's global generator seeded with ``seed`` inside, its state restored after: rliable's stratified
    bootstrap draws its resampling indices from it (not from the ``random_state`` it is given), so this is
    what makes a report's intervals the same on every run."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def rliable_modules() -> tuple:
    """rliable's ``library`` and ``metrics`` modules, or one RunError saying how to install them."""
    try:
        from rliable import library, metrics
    except ImportError as exc:
        raise RunError(
            f"aggregates with confidence intervals need rliable ({exc.name} is missing): "
            'pip install "retro-atari-kit[eval]"'
        ) from None
    return library, metrics


def iqm(scores: np.ndarray) -> np.float64:
    """The interquartile mean of all the scores: rliable's ``aggregate_iqm``, scipy's ``trim_mean`` of the
    flattened matrix with a quarter cut at each end (rounded down), the same partition and mean."""
    flat = np.ravel(scores)
    low = int(0.25 * flat.size)
    high = flat.size - low
    return np.mean(np.partition(flat, (low, high - 1))[low:high])


def improvement_probability(scores_x: np.ndarray, scores_y: np.ndarray) -> np.float64:
    """rliable's ``probability_of_improvement``: per game, the Mann-Whitney U of X over Y divided by the
    number of pairs of runs (pairs where X wins, plus half the ties), 0.5 where both columns are equal;
    then the mean over games."""
    per_game = []
    for x, y in zip(scores_x.T, scores_y.T, strict=True):
        if np.array_equal(x, y):
            per_game.append(0.5)
        else:
            wins = np.count_nonzero(x[:, None] > y) + 0.5 * np.count_nonzero(x[:, None] == y)
            per_game.append(np.float64(wins) / (x.size * y.size))
    return np.mean(per_game)


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """rliable's ``score_distributions``: the fraction of all the scores above each threshold in ``taus``."""
    return np.mean(np.ravel(scores)[None, :] > taus[:, None], axis=1)


def metric_functions() -> dict:
    """name -> the function of a ``(runs, games)`` matrix (rliable's, or its numpy twin above)."""
    _, m = rliable_modules()
    return {
        "IQM": iqm,
        "median": m.aggregate_median,
        "mean": m.aggregate_mean,
        "optimality_gap": m.aggregate_optimality_gap,
    }


def _check(name: str, scores: np.ndarray) -> np.ndarray:
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        raise RunError(f"{name}: scores must be a (runs, games) matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise RunError(f"{name}: scores must be finite numbers (one per run and game)")
    return a


def aggregate_with_ci(
    score_dict: Mapping[str, np.ndarray], reps: int = 50_000, ci: float = 0.95, seed: int = 0
) -> dict[str, dict[str, tuple[float, float, float]]]:
    """``{agent: {metric: (point, low, high)}}`` for IQM, median, mean and optimality gap (threshold 1.0),
    with ``ci`` stratified bootstrap confidence intervals over ``reps`` resamples (seeded: the same numbers
    on every run of a report)."""
    library, _ = rliable_modules()
    funcs = metric_functions()
    arrays = {k: _check(k, v) for k, v in score_dict.items()}

    def all_metrics(x: np.ndarray) -> np.ndarray:
        return np.array([funcs[name](x) for name in METRICS])

    with seeded(seed):
        points, intervals = library.get_interval_estimates(
            arrays, all_metrics, reps=reps, confidence_interval_size=ci
        )
    return {
        k: {
            name: (float(points[k][i]), float(intervals[k][0][i]), float(intervals[k][1][i]))
            for i, name in enumerate(METRICS)
        }
        for k in arrays
    }


def probability_of_improvement(
    scores_x: np.ndarray, scores_y: np.ndarray, reps: int = 2_000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """P(X > Y): the probability that a run of X beats a run of Y on a game drawn at random (Mann-Whitney
    U per game, averaged over games), with its stratified bootstrap CI. Both matrices have the same games
    (columns) in the same order; their numbers of runs may differ."""
    library, _ = rliable_modules()
    x, y = _check("X", scores_x), _check("Y", scores_y)
    if x.shape[1] != y.shape[1]:
        raise RunError(f"probability of improvement needs the same games: X has {x.shape[1]}, Y {y.shape[1]}")
    with seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"X,Y": (x, y)},
            lambda a, b: np.array([improvement_probability(a, b)]),
            reps=reps,
            confidence_interval_size=ci,
        )
    return float(points["X,Y"][0]), float(intervals["X,Y"][0][0]), float(intervals["X,Y"][1][0])


def performance_profiles(
    score_dict: Mapping[str, np.ndarray], taus: np.ndarray, reps: int = 2_000, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """rliable's run-score distributions: for each agent, the fraction of (run, game) scores above each
    threshold in ``taus`` (:func:`score_distribution`), with seeded bootstrap CIs."""
    library, _ = rliable_modules()
    arrays = {k: _check(k, v) for k, v in score_dict.items()}
    taus = np.asarray(taus, dtype=np.float64)
    with seeded(seed):
        return library.get_interval_estimates(arrays, lambda x: score_distribution(x, taus), reps=reps)
