"""``retrokit eval --protocol`` on committed agents: the record states the protocol it was played under,
value-based agents play epsilon-greedy under Nature, minimal-action policies are mapped into Machado's full
action set, and several models are evaluated at once (``--jobs``) with a progress line per game."""

from __future__ import annotations

import json
import os
import re

import pytest

from retro_atari_kit.cli import main

pytestmark = pytest.mark.slow

RESULTS = os.path.join(os.path.dirname(__file__), "..", "..", "results")
A2C, DQN = os.path.join(RESULTS, "pong-a2c-0"), os.path.join(RESULTS, "pong-dqn-0")


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_machado_record_of_a_minimal_action_policy(tmp_path, capsys):
    assert main(["eval", A2C, "--protocol", "machado", "--episodes", "1", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert re.fullmatch(r"true score over 1 games: mean \S+  std \S+  min \S+  max \S+\n", out)
    assert "protocol machado" in err and "(minimal actions mapped into the full action set)" in err
    assert re.search(r"^game 1/1: -?\d+ \(\d+ steps\)$", err, flags=re.M)
    record = load(tmp_path / "pong-a2c-0.machado.json")
    assert record["protocol"] == {
        "protocol": "machado",
        "frame_cap": 108_000,
        "env_kwargs": {
            "sticky_actions": 0.25,
            "full_action_space": True,
            "terminal_on_life_loss": False,
            "noop_max": 0,
            "max_episode_steps": None,
        },
    }
    assert record["action_map"] == [0, 1, 3, 4, 11, 12] and "epsilon" not in record
    assert record["command"].startswith("retrokit eval ") and record["command"].endswith(f"--out {tmp_path}")
    assert (record["algo"], record["network"], record["game"], record["steps"]) == (
        "a2c",
        "nature",
        "Pong",
        2_000_000,
    )
    assert len(record["scores"]) == len(record["lengths"]) == 1 and -21 <= record["scores"][0] <= 21


def test_nature_plays_dqn_epsilon_greedy_and_evaluates_models_in_parallel(tmp_path, capsys):
    argv = [
        "eval",
        DQN,
        A2C,
        "--protocol",
        "nature",
        "--episodes",
        "1",
        "--jobs",
        "2",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert sorted(re.findall(r"^(pong-\S+): game 1/1: ", err, flags=re.M)) == ["pong-a2c-0", "pong-dqn-0"]
    assert [line.split(":")[0] for line in out.splitlines()] == ["pong-dqn-0 (nature)", "pong-a2c-0 (nature)"]
    dqn, a2c = load(tmp_path / "pong-dqn-0.nature.json"), load(tmp_path / "pong-a2c-0.nature.json")
    assert dqn["epsilon"] == 0.05 and "epsilon" not in a2c and "action_map" not in dqn
    for record in (dqn, a2c):
        assert record["env_kwargs"]["max_episode_steps"] == 4500 and record["env_kwargs"]["noop_max"] == 30
        assert record["protocol"]["epsilon_value_based"] == 0.05 and record["lengths"][0] <= 4500
