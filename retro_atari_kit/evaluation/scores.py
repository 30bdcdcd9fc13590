"""Human-normalised scores and named game sets.

The random and human reference scores come from the ``atarihns`` package (57 games, the table of the
DQN / Rainbow / Agent57 papers), never typed in here. Atari-5's weights are the published regression of
Aitchison et al. (see :data:`ATARI5_WEIGHTS`); docs/evaluation.md gives the sources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

ATARI5 = ("BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert")
# Atari-5 (Aitchison, Sweetser, Hutter, ICML 2023): log10(1 + median_57) ~ sum_g w_g log10(1 + max(h_g, 0)),
# h_g the human-normalised score of game g in percent, no intercept; its cross-validated relative error is
# 10.4 %. The weights as published by the paper's first author in maitchison/PPO, tools/plot_util.py
# (AtariScoreNormalizer.SUBSETS["Atari_5"]), the source named in docs/evaluation.md.
ATARI5_WEIGHTS = {
    "BattleZone": 0.3819751237831753,
    "DoubleDunk": 0.0679099488887574,
    "NameThisGame": 0.310804148620847,
    "Phoenix": 0.12412619402774641,
    "Qbert": 0.08048518286466755,
}
ATARI5_RELATIVE_ERROR = 0.104
GAME_SETS = {"atari5": ATARI5}


def game_of(env_id: str) -> str:
    """The game of a kit env ID: ``RetroKit/Pong-v0`` -> ``Pong``, ``RetroKit/Pong-Atari2600-v0`` ->
    ``Pong-Atari2600``; other IDs are returned without namespace and version (``ALE/Pong-v5`` -> ``Pong``)."""
    name = env_id.split(":", 1)[-1].rsplit("/", 1)[-1]
    head, _, version = name.rpartition("-v")
    return head if head and version.isdigit() else name


def reference_scores(game: str) -> tuple[float, float] | None:
    """``(random, human)`` reference scores of an ALE game from ``atarihns``; None for a game it has no row
    for (stable-retro games, ALE games outside the 57)."""
    if "-" in game:  # a stable-retro game ("Pong-Atari2600"): another stack, no reference claimed
        return None
    from atarihns.functions import get_scores

    try:
        ref = get_scores(f"{game}-v5")
    except (KeyError, RuntimeError):
        return None
    return float(ref.random), float(ref.human)


def human_normalized(game: str, score: float) -> float | None:
    """``(score - random) / (human - random)`` with ``atarihns``'s references (1.0 = human level), or None
    where the game has no reference."""
    ref = reference_scores(game)
    if ref is None:
        return None
    random, human = ref
    return (float(score) - random) / (human - random)


def atari5_median_estimate(scores: Mapping[str, float]) -> float:
    """Aitchison et al.'s estimate of the 57-game median human-normalised score (as a ratio, 1.0 = human)
    from the raw scores of the five Atari-5 games. KeyError naming the games that are missing."""
    missing = [g for g in ATARI5 if g not in scores]
    if missing:
        raise KeyError(f"Atari-5 needs scores of {', '.join(ATARI5)}; missing: {', '.join(missing)}")
    total = 0.0
    for game, weight in ATARI5_WEIGHTS.items():
        percent = 100.0 * human_normalized(game, scores[game])  # type: ignore[operator]
        total += weight * math.log10(1.0 + max(percent, 0.0))
    return (10.0**total - 1.0) / 100.0
