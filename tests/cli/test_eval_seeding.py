"""``retrokit eval`` with the same seed, model and protocol plays the same games: sampled actions included,
one model after another or ``--jobs`` at once, with the loop or ``--vector``; another seed plays other
games; the seed (given or the default) is written to the eval record.

The committed Breakout agents play, sampling their actions; games are cut at 250 agent steps (the scores
then still depend on every action, and an evaluation takes seconds).
"""

from __future__ import annotations

import json
import os

import pytest

from retro_atari_kit.cli import main

pytestmark = pytest.mark.slow

RESULTS = os.path.join(os.path.dirname(__file__), "..", "..", "results")
BREAKOUT = os.path.join(RESULTS, "breakout-ppo-0")
BREAKOUT_ZOO = os.path.join(RESULTS, "breakout-ppo-zoo-schedule-0")
SHORT = ["--episodes", "2", "--env-kwarg", "max_episode_steps=250"]


def games(out, *args: str) -> dict[str, tuple[list[float], list[int], int]]:
    """Evaluate and read back each record: run -> (scores, lengths, eval seed)."""
    assert main(["eval", *args, *SHORT, "--out", str(out)]) == 0
    played = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name), encoding="utf-8") as f:
            record = json.load(f)
        played[record["run"]] = (record["scores"], record["lengths"], record["eval_seed"])
    return played


@pytest.mark.timeout(600)
def test_the_same_seed_plays_the_same_games_and_the_record_keeps_it(tmp_path, capsys):
    first = games(tmp_path / "a", BREAKOUT, "--seed", "7")
    assert games(tmp_path / "b", BREAKOUT, "--seed", "7") == first
    assert first["breakout-ppo-0"][2] == 7
    default = games(tmp_path / "c", BREAKOUT)  # no --seed: the default, written down
    assert default["breakout-ppo-0"][2] == 12345
    assert default["breakout-ppo-0"][:2] != first["breakout-ppo-0"][:2]
    capsys.readouterr()


@pytest.mark.timeout(600)
def test_models_evaluated_at_once_play_the_games_they_play_one_after_another(tmp_path, capsys):
    one_by_one = games(tmp_path / "seq", BREAKOUT, BREAKOUT_ZOO, "--seed", "3")
    assert games(tmp_path / "par", BREAKOUT, BREAKOUT_ZOO, "--seed", "3", "--jobs", "2") == one_by_one
    assert sorted(one_by_one) == ["breakout-ppo-0", "breakout-ppo-zoo-schedule-0"]
    # the second model's games do not depend on the first having played before it in the same process
    assert games(tmp_path / "alone", BREAKOUT_ZOO, "--seed", "3") == {
        "breakout-ppo-zoo-schedule-0": one_by_one["breakout-ppo-zoo-schedule-0"]
    }
    capsys.readouterr()


@pytest.mark.timeout(600)
def test_the_vector_backend_plays_the_same_games_for_the_same_seed(tmp_path, capsys):
    first = games(tmp_path / "a", BREAKOUT, "--seed", "7", "--vector")
    assert games(tmp_path / "b", BREAKOUT, "--seed", "7", "--vector") == first
    assert games(tmp_path / "c", BREAKOUT, "--seed", "8", "--vector") != first
    capsys.readouterr()
