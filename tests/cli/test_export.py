"""``retrokit export``: a small copy of a run that ``retrokit eval`` scores exactly as the run itself."""

from __future__ import annotations

import json
import os

import pytest
import torch

from retro_atari_kit.cli import main

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"
# a short game cap keeps the evaluations quick; the same cap for the run and its export
EVAL = ["--episodes", "2", "--deterministic", "--json", "--env-kwarg", "max_episode_steps=300"]


def _eval(target: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["eval", target, *EVAL]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory) -> str:
    run = str(tmp_path_factory.mktemp("runs") / "dqn")
    args = ["train", "dqn", ENV, "--timesteps", "300", "--run-dir", run, "--preset", "pong-dqn"]
    sets = [
        "buffer_size=1000",
        "learning_starts=100",
        "target_update_interval=50",
        "exploration_fraction=0.5",
    ]
    assert main([*args, *(x for s in sets for x in ("--set", s))]) == 0
    return run


def test_dqn_export_is_small_and_scores_as_the_run(dqn_run, tmp_path, capsys):
    from stable_baselines3 import DQN

    out = str(tmp_path / "published")
    assert main(["export", dqn_run, out]) == 0
    assert sorted(os.listdir(out)) == ["config.yaml", "log.txt", "model.zip", "monitor", "progress.csv"]
    assert os.listdir(os.path.join(out, "monitor")) == ["0.monitor.csv"]
    full, small = os.path.getsize(os.path.join(dqn_run, "model.zip")), os.path.getsize(f"{out}/model.zip")
    assert small < 0.4 * full, (small, full)  # no Adam moments, the target network stored once
    assert small < 10 * 2**20
    # plain SB3 reads it: the online network as trained, the target network equal to it, kept apart
    plain = DQN.load(f"{out}/model.zip", device="cpu")
    original = DQN.load(f"{dqn_run}/model.zip", device="cpu")
    for a, b, t in zip(
        plain.q_net.parameters(), original.q_net.parameters(), plain.q_net_target.parameters(), strict=True
    ):
        assert torch.equal(a, b) and torch.equal(t, b) and t.data_ptr() != a.data_ptr()
    assert not plain.policy.optimizer.state_dict()["state"]
    assert _eval(out, capsys)["scores"] == _eval(dqn_run, capsys)["scores"]


def test_export_refuses_a_non_empty_target_and_writes_nothing(dqn_run, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["export", dqn_run, str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an empty directory" in err[0]
    assert os.listdir(out) == ["keep.txt"]
    assert main(["export", str(tmp_path / "nothing-here"), str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".export-")]


def test_rllib_export_copies_the_policy(tmp_path, capsys):
    run = os.path.join(os.path.dirname(__file__), "..", "..", "results", "pong-rllib-ppo-0")
    out = str(tmp_path / "again")
    assert main(["export", run, out]) == 0
    with open(os.path.join(run, "model", "policy.pt"), "rb") as a, open(f"{out}/model/policy.pt", "rb") as b:
        assert a.read() == b.read()
    assert len(os.listdir(f"{out}/monitor")) == 8
