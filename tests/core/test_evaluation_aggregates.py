"""Human-normalised scores are the reference table's (``atarihns``), Atari-5's estimate is the published
regression, and every aggregate equals rliable's own function on the same arrays (to the bit, where the kit
computes rliable's metric in numpy) and a case worked by hand."""

from __future__ import annotations

import math

import atarihns
import numpy as np
import pytest
from rliable import library, metrics

from retro_atari_kit.errors import RunError
from retro_atari_kit.evaluation import ATARI5, atari5_median_estimate, game_of, human_normalized
from retro_atari_kit.evaluation.aggregate import (
    aggregate_with_ci,
    improvement_probability,
    iqm,
    performance_profiles,
    probability_of_improvement,
    score_distribution,
)
from retro_atari_kit.evaluation.scores import ATARI5_WEIGHTS, reference_scores

GAMES_57 = [name.removesuffix("-v5") for name in atarihns.constants.ATARI_SCORES]


def test_human_normalised_scores_are_the_reference_tables():
    assert len(GAMES_57) == 57
    for game in GAMES_57:
        random, human = reference_scores(game)
        assert (random, human) == (atarihns.get_random_score(game), atarihns.get_human_score(game))
        for score in (random, human, 1234.5):
            assert human_normalized(game, score) == pytest.approx(atarihns.calculate_hns(f"{game}-v5", score))
        assert human_normalized(game, random) == 0.0 and human_normalized(game, human) == pytest.approx(1.0)
    # worked by hand: Pong random -20.7, human 14.6; Breakout 1.7, 30.5
    assert human_normalized("Pong", 21.0) == pytest.approx(41.7 / 35.3)
    assert human_normalized("Breakout", 59.3) == pytest.approx(2.0)


def test_games_without_a_reference_have_none():
    assert reference_scores("Airstriker-Genesis") is None and reference_scores("Pong-Atari2600") is None
    assert human_normalized("Pacman", 100.0) is None  # an ALE game outside the 57
    assert [game_of(e) for e in ("RetroKit/Pong-v0", "RetroKit/Pong-Atari2600-v0", "ALE/MsPacman-v5")] == [
        "Pong",
        "Pong-Atari2600",
        "MsPacman",
    ]


def test_atari5_estimate_is_the_published_regression():
    assert tuple(ATARI5_WEIGHTS) == ATARI5 == ("BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert")
    human = {g: reference_scores(g)[1] for g in ATARI5}
    # every game at human level (100 %): log10(1 + median) = sum(w) * log10(101), worked by hand
    expected = (101 ** sum(ATARI5_WEIGHTS.values()) - 1) / 100
    assert atari5_median_estimate(human) == pytest.approx(expected)
    assert atari5_median_estimate({g: reference_scores(g)[0] for g in ATARI5}) == 0.0  # random level
    # below random counts as 0; one game at 200 %: only its term changes
    scores = {**{g: reference_scores(g)[0] - 100 for g in ATARI5}, "Qbert": 163.9 + 2 * (13455.0 - 163.9)}
    assert atari5_median_estimate(scores) == pytest.approx((201 ** ATARI5_WEIGHTS["Qbert"] - 1) / 100)
    with pytest.raises(KeyError, match="missing: Phoenix, Qbert"):
        atari5_median_estimate({g: 0.0 for g in ATARI5[:3]})


def test_aggregates_worked_by_hand():
    scores = np.arange(8, dtype=float).reshape(2, 4)  # 2 runs x 4 games: 0..7
    got = aggregate_with_ci({"a": scores}, reps=500)["a"]
    assert got["IQM"][0] == pytest.approx(3.5)  # the middle half 2, 3, 4, 5
    assert got["median"][0] == pytest.approx(3.5)  # the median of the per-game means 2, 3, 4, 5
    assert got["mean"][0] == pytest.approx(3.5)
    assert got["optimality_gap"][0] == pytest.approx(1 - 7 / 8)  # min(x, 1): 0, 1, 1, ... -> mean 7/8
    # X beats Y in 3 of the 4 pairs of runs on the one game
    p, low, high = probability_of_improvement(np.array([[3.0], [5.0]]), np.array([[1.0], [4.0]]), reps=200)
    assert p == pytest.approx(0.75) and 0.0 <= low <= p <= high <= 1.0


def test_aggregates_equal_rliables_own_functions_on_the_same_arrays():
    rng = np.random.default_rng(0)
    data = {"A": rng.normal(1.0, 0.5, (5, 7)), "B": rng.gamma(2.0, 0.4, (3, 7))}
    got = aggregate_with_ci(data, reps=300, seed=4)
    assert aggregate_with_ci(data, reps=300, seed=4) == got  # the same intervals every time
    funcs = {
        "IQM": metrics.aggregate_iqm,
        "median": metrics.aggregate_median,
        "mean": metrics.aggregate_mean,
        "optimality_gap": metrics.aggregate_optimality_gap,
    }
    np.random.seed(4)  # rliable resamples with numpy's global generator; the kit seeds it the same way
    points, cis = library.get_interval_estimates(
        data, lambda x: np.array([f(x) for f in funcs.values()]), reps=300
    )
    for key in data:
        for i, name in enumerate(funcs):
            assert got[key][name][0] == pytest.approx(funcs[name](data[key]))
            assert got[key][name] == pytest.approx((points[key][i], cis[key][0][i], cis[key][1][i]))
            assert got[key][name][1] <= got[key][name][0] <= got[key][name][2]
    x, y = data["A"], data["B"]
    p = probability_of_improvement(x, y, reps=200, seed=1)
    assert p[0] == pytest.approx(metrics.probability_of_improvement(x, y))
    taus = np.linspace(0, 2, 11)
    profiles, _ = performance_profiles(data, taus, reps=100)
    for key in data:
        assert np.allclose(profiles[key], [np.mean(data[key] > t) for t in taus])


def test_the_numpy_metrics_are_rliables_to_the_bit():
    """The IQM, the probability of improvement and the score distribution are computed without rliable's
    per-call wrappers (scipy's argument checks, np.vectorize): the same numbers to the last bit, ties,
    equal columns and odd sizes included, so a report's points and intervals stay rliable's."""
    rng = np.random.default_rng(0)
    taus = np.linspace(-2, 2, 9)
    for case in range(600):
        games = int(rng.integers(1, 6))
        shapes = [(int(rng.integers(1, 8)), games) for _ in range(2)]
        if case % 2:  # integer scores: ties within and across the two matrices
            x, y = (rng.integers(-3, 4, shape).astype(float) for shape in shapes)
        else:
            x, y = (rng.normal(size=shape) for shape in shapes)
        if case % 5 == 0:
            y = x.copy()  # equal columns: 0.5 by rule, not by the U statistic
        assert iqm(x) == metrics.aggregate_iqm(x)
        assert improvement_probability(x, y) == metrics.probability_of_improvement(x, y)
        assert np.array_equal(score_distribution(x, taus), library.score_distributions(x, taus))
    # and the intervals built on them: rliable's bootstrap over rliable's functions, same seed
    x, y = rng.normal(1.0, 0.5, (4, 3)), rng.integers(0, 3, (3, 3)).astype(float)
    np.random.seed(2)
    _, cis = library.get_interval_estimates(
        {"X,Y": (x, y)}, lambda a, b: np.array([metrics.probability_of_improvement(a, b)]), reps=300
    )
    assert probability_of_improvement(x, y, reps=300, seed=2)[1:] == (cis["X,Y"][0][0], cis["X,Y"][1][0])
    np.random.seed(3)
    _, cis = library.get_interval_estimates(
        {"x": x}, lambda a: library.score_distributions(a, taus), reps=300
    )
    assert np.array_equal(performance_profiles({"x": x}, taus, reps=300, seed=3)[1]["x"], cis["x"])


def test_bad_matrices_are_one_clear_error():
    with pytest.raises(RunError, match=r"A: scores must be a \(runs, games\) matrix, got shape \(3,\)"):
        aggregate_with_ci({"A": np.zeros(3)})
    with pytest.raises(RunError, match="finite"):
        aggregate_with_ci({"A": np.array([[math.nan]])})
    with pytest.raises(RunError, match="needs the same games: X has 2, Y 1"):
        probability_of_improvement(np.zeros((2, 2)), np.zeros((2, 1)))
