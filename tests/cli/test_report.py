"""``retrokit report`` on eval records written by the kit's own writer and on a committed run's monitor CSVs:
every number in its CSVs is checked against rliable / atarihns / the Atari-5 regression computed here."""

from __future__ import annotations

import csv
import os
import shlex

import numpy as np
import pytest
from rliable import metrics

from retro_atari_kit.cli import main
from retro_atari_kit.evaluation import ATARI5, atari5_median_estimate, human_normalized
from retro_atari_kit.evaluation.protocols import PROTOCOLS
from retro_atari_kit.evaluation.records import make_record, write_record

COMMITTED_RUN = os.path.join(os.path.dirname(__file__), "..", "..", "results", "pong-dqn-0")
A_GAMES = ("Pong", "Breakout", *ATARI5)


def scores_of(agent: str, run: int, game: str) -> list[float]:
    base = {"Pong": 10.0, "Breakout": 20.0}.get(game, 1000.0 + 100 * A_GAMES.index(game))
    lift = 5.0 if agent == "a" else 0.0
    return [base + lift + run + k for k in range(3)]  # 3 games per evaluation


def write_records(folder: str) -> None:
    for agent, games in (("a", A_GAMES), ("b", ("Pong", "Breakout"))):
        for run in range(2):
            for game in games:
                record = make_record(
                    scores=scores_of(agent, run, game),
                    lengths=[100, 100, 100],
                    env_id=f"RetroKit/{game}-v0",
                    protocol=PROTOCOLS["machado"].settings(),
                    env_kwargs=dict(PROTOCOLS["machado"].env_kwargs),
                    run=f"{agent}-{game.lower()}-{run}",
                    model="model.zip",
                    config={"algo": "ppo", "network": "nature", "engine": "sb3", "seed": run},
                    steps=1000,
                    eval_seed=0,
                    deterministic=False,
                    command="retrokit eval ...",
                )
                write_record(record, folder)


def read_csv(path: str) -> tuple[str, list[dict[str, str]]]:
    with open(path, encoding="utf-8") as f:
        first = f.readline()
        return first, list(csv.DictReader(f))


def test_report_tables_equal_rliable_atarihns_and_atari5(tmp_path, capsys):
    records, out = str(tmp_path / "records"), str(tmp_path / "report")
    write_records(records)
    argv = [
        "report",
        records,
        COMMITTED_RUN,
        "--out",
        out,
        "--group",
        "A=a-*",
        "--group",
        "B=b-*",
        "--reps",
        "300",
    ]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("# Evaluation report") and "| machado |" in stdout

    first, per_game = read_csv(os.path.join(out, "per_game.csv"))
    assert first == f"# made by: {shlex.join(['retrokit', *argv])}\n"  # the exact command, quoted
    row = next(r for r in per_game if r["agent"] == "A" and r["game"] == "Pong")
    mean = np.mean([np.mean(scores_of("a", run, "Pong")) for run in range(2)])  # 16.5
    assert (row["runs"], row["episodes"], float(row["mean"])) == ("2", "6", pytest.approx(mean))
    assert float(row["human_normalized"]) == pytest.approx(human_normalized("Pong", mean), rel=1e-5)
    # the 6 evaluation games (15, 16, 17 and 16, 17, 18) pooled: a bootstrap CI of their mean
    assert 15.0 <= float(row["games_mean_low"]) < mean < float(row["games_mean_high"]) <= 18.0

    _, aggregates = read_csv(os.path.join(out, "aggregates.csv"))
    hns = np.array(
        [[human_normalized(g, np.mean(scores_of("a", run, g))) for g in sorted(A_GAMES)] for run in range(2)]
    )
    iqm = next(r for r in aggregates if r["agent"] == "A" and r["metric"] == "IQM")
    assert float(iqm["value"]) == pytest.approx(metrics.aggregate_iqm(hns), rel=1e-5)
    assert float(iqm["low"]) <= float(iqm["value"]) <= float(iqm["high"])
    gap = next(r for r in aggregates if r["agent"] == "B" and r["metric"] == "optimality_gap")
    b = np.array(
        [[human_normalized(g, np.mean(scores_of("b", r, g))) for g in ("Breakout", "Pong")] for r in range(2)]
    )
    assert float(gap["value"]) == pytest.approx(metrics.aggregate_optimality_gap(b), rel=1e-5)

    _, improvement = read_csv(os.path.join(out, "improvement.csv"))
    assert [(r["x"], r["y"], r["games"], float(r["p_x_better"])) for r in improvement] == [
        ("A", "B", "Breakout Pong", 1.0)  # every run of A beats every run of B on both games they share
    ]
    _, atari5 = read_csv(os.path.join(out, "atari5.csv"))
    means = {g: np.mean([np.mean(scores_of("a", run, g)) for run in range(2)]) for g in ATARI5}
    assert [r["agent"] for r in atari5] == ["A"]
    assert float(atari5[0]["median57_estimate"]) == pytest.approx(atari5_median_estimate(means), rel=1e-5)

    for png in ("performance_profile.png", "sample_efficiency.png"):
        with open(os.path.join(out, png), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
        assert f.read().strip() == stdout.strip()
    assert "![sample efficiency](sample_efficiency.png)" in stdout


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--group", "A"], "--group 'A': use NAME=PATTERN[,PATTERN]"),
        (["--group", "A=x", "--group", "A=y"], "--group 'A' given twice"),
    ],
)
def test_bad_groups_are_one_line(tmp_path, capsys, argv, needle):
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and not (tmp_path / "r").exists()


def test_inputs_without_records_or_runs_are_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("retrokit: error: no eval records or run dirs") and err.count("\n") == 1
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r")]) == 2
    assert "nope: no such run dir, eval folder or eval record" in capsys.readouterr().err


def test_other_json_files_are_ignored_and_a_damaged_record_is_one_line(tmp_path, capsys):
    (tmp_path / "other.json").write_text('{"not": "a record"}')
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "no eval records or run dirs" in capsys.readouterr().err
    (tmp_path / "cut.json").write_text('{"kind": "retro-atari-kit eval", "scores": [1')
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'cut.json'}: cannot read eval record" in err
