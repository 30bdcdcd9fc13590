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
from retro_atari_kit.evaluation.records import make_record, write_record
from retro_atari_kit.protocols import PROTOCOLS
from tests.cli._run import edit_record

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


def one_record(folder, run: str = "pong-0", game: str = "Pong", algo: str = "ppo", changes=None) -> str:
    """An eval record written by the kit's own writer into ``folder``, then ``changes`` made to it as a
    an untrusted writer or a damaged disk leaves it (``"protocol.x"`` names a field of the protocol; the value
    ``...`` removes the field)."""

    record = make_record(
        scores=[-21.0, -20.0, -19.0],
        lengths=[800, 800, 800],
        env_id=f"RetroKit/{game}-v0",
        protocol=PROTOCOLS["training"].settings(),
        env_kwargs={},
        run=run,
        model=f"{run}/model.zip",
        config={"algo": algo, "network": "nature", "engine": "sb3", "seed": 0},
        steps=1000,
        eval_seed=0,
        deterministic=False,
        command="retrokit eval ...",
    )
    path = write_record(record, str(folder))
    if changes:
        edit_record(path, changes)
    return path


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"protocol": ...}, "eval record without 'protocol'"),
        ({"protocol": None}, "field 'protocol' is null, must be a mapping"),
        ({"protocol": "training"}, "field 'protocol' is the text 'training', must be a mapping"),
        ({"protocol": ["training"]}, "field 'protocol' is a list"),
        ({"protocol.protocol": ...}, "eval record without 'protocol.protocol'"),
        ({"protocol.protocol": 5}, "field 'protocol.protocol' is the number 5"),
        ({"protocol.protocol": "a [b]"}, "field 'protocol.protocol' is the text 'a [b]'"),
        ({"protocol.env_kwargs": "a"}, "field 'protocol.env_kwargs' is the text 'a', must be a mapping"),
        ({"protocol.epsilon_value_based": "a"}, "field 'protocol.epsilon_value_based' is the text 'a'"),
        ({"game": ...}, "eval record without 'game'"),
        ({"game": 5}, "field 'game' is the number 5"),
        ({"game": True}, "field 'game' is the boolean true"),
        ({"game": ["Pong"]}, "field 'game' is a list"),
        ({"game": {"name": "Pong"}}, "field 'game' is a mapping"),
        ({"scores": ...}, "eval record without 'scores'"),
        ({"scores": "1,2"}, "field 'scores' is the text '1,2'"),
        ({"scores": []}, "field 'scores' is an empty list"),
        ({"scores": [[1, 2]]}, "field 'scores' is a list whose item 1 is a list"),
        ({"scores": [1, True]}, "field 'scores' is a list whose item 2 is the boolean true"),
        ({"scores": [1, "2"]}, "field 'scores' is a list whose item 2 is the text '2'"),
        ({"scores": [float("nan")]}, "field 'scores' is a list whose item 1 is the number nan"),
        ({"run": ...}, "eval record without 'run'"),
        ({"run": 7}, "field 'run' is the number 7"),
        ({"model": ["a"]}, "field 'model' is a list"),
        ({"algo": {"x": 1}}, "field 'algo' is a mapping"),
        ({"created": 5}, "field 'created' is the number 5"),
        ({"steps": "many"}, "field 'steps' is the text 'many'"),
        ({"deterministic": "yes"}, "field 'deterministic' is the text 'yes', must be true or false"),
        ({"epsilon": 2}, "field 'epsilon' is the number 2, must be a number from 0 to 1"),
        ({"lengths": [1.5]}, "field 'lengths' is a list whose item 1 is the number 1.5"),
    ],
)
def test_a_record_with_a_missing_or_mistyped_field_is_one_line_naming_it(tmp_path, capsys, fields, needle):
    path = one_record(tmp_path / "ev", changes=fields)
    assert main(["report", str(tmp_path / "ev"), "--out", str(tmp_path / "r"), "--reps", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"retrokit: error: {path}: "), err
    assert needle in err and "retrokit eval --out" in err, err
    assert not (tmp_path / "r").exists()


def _cells(path: str) -> list[str]:
    """Every cell of a CSV as a spreadsheet splits it: the comment line at its commas, the rest as CSV."""
    with open(path, encoding="utf-8", newline="") as f:
        first, rest = f.readline(), f.read()
    return first.rstrip("\n").split(",") + [cell for row in csv.reader(rest.splitlines()) for cell in row]


def _formula(cell: str) -> bool:
    import re

    number = re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", cell.strip())
    return cell.lstrip(" ")[:1] in ("=", "+", "-", "@", "\t", "\r", "\n", '"') and number is None


def test_no_csv_cell_is_a_formula_and_negative_scores_stay_numbers(tmp_path, capsys):
    # names a spreadsheet would run (OWASP's CSV injection list), from records and from --group
    ev = tmp_path / "ev"
    one_record(ev, run="a-0", algo="=cmd|' /C calc'!A0")
    one_record(ev, run="b-0", algo="@sum(1+1)")
    one_record(ev, run="c-0", changes={"protocol.protocol": "-x"})
    one_record(ev, run="d-0", changes={"protocol.protocol": "-x"})
    one_record(ev, run="e-0", game="-Pong")
    argv = ["report", str(ev), "--out", str(tmp_path / "r"), "--reps", "50", "--group=-2+3=c-*"]
    argv += ["--group", "+x=d-*", "--games", 'Pong,-Pong,"=cmd|x"']
    assert main(argv) == 0
    capsys.readouterr()
    written = sorted(p for p in os.listdir(tmp_path / "r") if p.endswith(".csv"))
    assert written == ["aggregates.csv", "improvement.csv", "per_game.csv"]
    for name in written:
        cells = _cells(str(tmp_path / "r" / name))
        assert not [c for c in cells if _formula(c)], (name, [c for c in cells if _formula(c)])
    _, per_game = read_csv(str(tmp_path / "r" / "per_game.csv"))
    assert {(r["agent"], r["protocol"], r["game"]) for r in per_game} == {
        ("'=CMD|' /C CALC'!A0 nature", "training", "Pong"),
        ("'@SUM(1+1) nature", "training", "Pong"),
        ("'-2+3", "'-x", "Pong"),
        ("'+x", "'-x", "Pong"),
        ("PPO nature", "training", "'-Pong"),
    }
    assert {r["mean"] for r in per_game} == {"-20"} and {r["games_mean_low"] for r in per_game} == {"-21"}
    _, improvement = read_csv(str(tmp_path / "r" / "improvement.csv"))
    assert [(r["x"], r["y"], r["protocol"]) for r in improvement] == [("'-2+3", "'+x", "'-x")]
    with open(tmp_path / "r" / "per_game.csv", encoding="utf-8") as f:  # the command, word for word
        line = f.readline().removeprefix("# made by: ")
    assert shlex.split(line)[1:] == argv


def test_progress_merge_writes_no_formula(tmp_path):
    from retro_atari_kit.runs.progress import merge_progress

    (tmp_path / "progress.csv").write_text("time/total_timesteps,rollout/ep_rew_mean,note\n32,-21.0,=cmd|x\n")
    (tmp_path / "progress.part1.csv").write_text("time/total_timesteps,rollout/ep_rew_mean,@x\n64,-20.5,+1\n")
    merge_progress(str(tmp_path))
    with open(tmp_path / "progress.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [
        ["time/total_timesteps", "rollout/ep_rew_mean", "note", "'@x"],
        ["32", "-21.0", "'=cmd|x", ""],
        ["64", "-20.5", "", "+1"],
    ]


def _file_size_limit(limit: int):
    """In the child: files larger than ``limit`` bytes cannot be written (``ulimit -f``), said as EFBIG."""

    def lower() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return lower


def test_a_report_that_fails_half_way_writes_nothing_and_keeps_the_earlier_one(tmp_path, capsys):
    from tests.cli._run import one_error_line, retrokit, snapshot

    one_record(tmp_path / "ev")
    # an earlier report, with an improvement table that the next one (no groups) has no more
    groups = ["--group", "A=pong-*", "--group", "B=other-*"]
    assert main(["report", str(tmp_path / "ev"), "--out", str(tmp_path / "r"), "--reps", "50", *groups]) == 0
    capsys.readouterr()
    before = snapshot(tmp_path)
    # the CSVs fit under 20 kB, the performance profile does not: the disk refuses half way through
    for out in ("r", "new"):
        res = retrokit(
            "report", "ev", "--out", out, "--reps", "50", cwd=tmp_path, preexec=_file_size_limit(20_000)
        )
        one_error_line(res, f"cannot write the report to {out}: File too large", last=True)
        assert snapshot(tmp_path) == before  # no half report, no temporary beside it, the earlier one kept
    # and a report that succeeds replaces the earlier one whole: its improvement table does not linger
    assert main(["report", str(tmp_path / "ev"), "--out", str(tmp_path / "r"), "--reps", "50"]) == 0
    assert sorted(os.listdir(tmp_path / "r")) == [
        "aggregates.csv",
        "per_game.csv",
        "performance_profile.png",
        "report.md",
    ]


@pytest.mark.parametrize(
    ("setup", "out", "needle"),
    [
        ("file", "afile", "--out afile: not a folder"),
        ("other", "notes", "--out notes: holds files that are not a report's (todo.txt)"),
        (None, "/proc/report", "--out /proc/report: No such file or directory; /proc is the kernel's view"),
        (None, "x" * 300, "File name too long"),
        ("link", "gone", "--out gone: a link to"),
        (None, ".", "--out .: the current folder or one above it"),
    ],
)
def test_report_out_is_checked_before_any_record_is_read(tmp_path, monkeypatch, capsys, setup, out, needle):
    # a record that would stop the report: the --out mistake must be the line, said before it is read
    one_record(tmp_path / "ev", changes={"scores": "damaged"})
    if setup == "file":
        (tmp_path / "afile").write_text("mine\n")
    elif setup == "other":
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "todo.txt").write_text("mine\n")
    elif setup == "link":
        (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    assert main(["report", "ev", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert sorted(os.listdir(tmp_path)) == before


def test_a_run_with_no_finished_game_is_nothing_to_report(tiny_run, tmp_path, capsys):
    # 64 training steps: no game of Pong has ended, its monitor CSVs have no row
    assert main(["report", tiny_run, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Number of columns" not in err, err
    assert err.startswith(
        f"retrokit: error: nothing to report: no eval records; {tiny_run} has no finished game in its "
        "monitor CSVs yet; train longer (a game must end), or evaluate with `retrokit eval RUN_DIR --out DIR`"
    ), err
    assert not (tmp_path / "r").exists()
    # with a record beside it, the report is made and says why the run has no curve
    one_record(tmp_path / "ev")
    assert main(["report", tiny_run, str(tmp_path / "ev"), "--out", str(tmp_path / "r"), "--reps", "50"]) == 0
    err = capsys.readouterr().err
    assert f"retrokit: note: {tiny_run} has no finished game in its monitor CSVs yet; left out" in err
    assert not (tmp_path / "r" / "sample_efficiency.png").exists()


def test_records_of_two_runs_that_share_a_name_are_said_to_count_once(tmp_path, capsys):
    # a/run and b/run evaluated into two folders: one run name, two model files
    first = one_record(tmp_path / "ev1", run="run", changes={"model": "a/run/model.zip"})
    second = one_record(tmp_path / "ev2", run="run", changes={"model": "b/run/model.zip"})
    argv = [
        "report",
        str(tmp_path / "ev1"),
        str(tmp_path / "ev2"),
        "--out",
        str(tmp_path / "r"),
        "--reps",
        "50",
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (
        "retrokit: note: run 'run' on Pong [training]: 2 records of different model files "
        f"({first}, {second}) share the run name; the newest counts"
    ) in err


def test_a_runs_curve_is_labelled_as_its_eval_records_are():
    """The sample-efficiency curves of the committed Breakout runs: the one trained with sticky actions of its
    own is not pooled with the default stack's, and each curve has the label its eval records have in the
    tables (records: ``train_protocol`` / ``train_env_kwargs``; a run dir: its config's names for them)."""
    import json

    from retro_atari_kit.cli.report import run_entries
    from retro_atari_kit.evaluation.report import default_label

    results = os.path.join(os.path.dirname(__file__), "..", "..", "results")
    runs = [os.path.join(results, name) for name in ("breakout-ppo-0", "breakout-ppo-sticky-0")]
    entries, left_out = run_entries(runs, {}, None, [])
    assert left_out == []
    assert [e["agent"] for e in entries] == ["PPO nature", "PPO nature, trained sticky"]
    with open(os.path.join(results, "evaluation", "machado", "breakout-ppo-sticky-0.machado.json")) as f:
        assert default_label(json.load(f)) == entries[1]["agent"]
