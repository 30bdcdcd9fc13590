"""``retrokit report`` and ``retrokit eval --out``: eval records that are damaged or untrusted, names a
spreadsheet would run, output paths that cannot be written, runs that share a name, runs with no finished
game."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from tests.cli._run import edit_record
from tests.sweep._setups import folder, named, replace_with, run_copy, text
from tests.sweep._sweep import Case, check, ci_first, params

pytestmark = [pytest.mark.sweep, pytest.mark.slow]


def record(run: str = "pong-0", algo: str = "ppo", changes: dict | None = None, into: str = "ev"):
    """``<into>/<run>.training.json``: an eval record of the kit's own writer, with ``changes`` made to it
    (``"protocol.x"`` names a field of the protocol; the value ``...`` removes the field)."""
    from retro_atari_kit.evaluation.records import make_record, write_record
    from retro_atari_kit.protocols import PROTOCOLS

    def setup(d: Path) -> None:
        data = make_record(
            scores=[-21.0, -20.0], lengths=[800, 900], env_id="RetroKit/Pong-v0",
            protocol=PROTOCOLS["training"].settings(), env_kwargs={}, run=run, model=f"{run}/model.zip",
            config={"algo": algo, "network": "nature", "engine": "sb3", "seed": 0}, steps=1000,
            eval_seed=0, deterministic=False, command="retrokit eval ...",
        )  # fmt: skip
        path = write_record(data, str(d / into))
        if changes:
            edit_record(path, changes)  # as a damaged disk or an untrusted hand leaves it

    shown = ", ".join(f"{k}: {'removed' if v is ... else json.dumps(v)}" for k, v in (changes or {}).items())
    return named(f"record {into}/{run}" + (f" ({shown})" if shown else ""), setup)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def no_formula(d: Path, output: str, before: list[int]) -> list[str]:
    """Every cell of every CSV of the report (its comment line split at commas, as a spreadsheet does)
    is text or a number, never a formula."""
    problems, csvs = [], sorted((d / "r").glob("*.csv"))
    if not csvs:
        return ["no CSV written"]
    for path in csvs:
        first, *rest = path.read_text(encoding="utf-8").splitlines()
        for cell in first.split(",") + [c for row in csv.reader(rest) for c in row]:
            head = cell.lstrip(" ")[:1]
            if head in ("=", "+", "-", "@", "\t", "\r", '"') and not _NUMBER.fullmatch(cell.strip()):
                problems.append(f"{path.name}: a formula {cell!r}")
    return problems


def report_cases() -> list[Case]:
    cases: list[Case] = []

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(group, list(argv), **kw))

    g = "report: damaged records"
    for changes, needle in (
        ({"protocol": ...}, "without 'protocol'"),
        ({"protocol": "machado"}, "field 'protocol' is the text"),
        ({"protocol.protocol": None}, "field 'protocol.protocol' is null"),
        ({"protocol.frame_cap": "long"}, "field 'protocol.frame_cap'"),
        ({"game": ...}, "without 'game'"),
        ({"game": 42}, "field 'game' is the number 42"),
        ({"game": ["Pong", "Breakout"]}, "field 'game' is a list"),
        ({"game": "Pong Breakout"}, "field 'game' is the text"),
        ({"scores": None}, "field 'scores' is null"),
        ({"scores": {"mean": 1}}, "field 'scores' is a mapping"),
        ({"scores": [[-21, -20]]}, "item 1 is a list"),
        ({"scores": [False, True]}, "item 1 is the boolean false"),
        ({"scores": [1e400]}, "item 1 is the number inf"),
        ({"run": None}, "field 'run' is null"),
        ({"run": ["a", "b"]}, "field 'run' is a list"),
        ({"algo": 3}, "field 'algo' is the number 3"),
        ({"network": True}, "field 'network' is the boolean true"),
        ({"engine": {"sb3": 1}}, "field 'engine' is a mapping"),
        ({"model": None}, "field 'model' is null"),
        ({"created": ["2026"]}, "field 'created' is a list"),
        ({"steps": 1.5}, "field 'steps' is the number 1.5"),
        ({"deterministic": "no"}, "field 'deterministic' is the text"),
        ({"epsilon": "0.05"}, "field 'epsilon' is the text"),
        ({"action_map": [0, "1"]}, "field 'action_map' is a list whose item 2"),
    ):
        add(g, "report", "ev", "--out", "r", setup=[record(changes=changes)], needles=(needle,))
    cut = '{"kind": "retro-atari-kit eval", "run": ['
    add(g, "report", "ev", "--out", "r", setup=[text("ev/x.json", cut)], needles=("cannot read eval record",))
    add(g, "report", "ev", "--out", "r", setup=[text("ev/x.json", "[" * 100_000 + "]" * 100_000)],
        expect="error", needles=("ev/x.json",))  # fmt: skip

    g = "report: --out"
    good = [record()]
    add(g, "report", "ev", "--out", "/proc/r", setup=good, needles=("/proc is the kernel's view",))
    add(g, "report", "ev", "--out", "afile", setup=[*good, text("afile")], needles=("not a folder",))
    add(g, "report", "ev", "--out", "mine", setup=[*good, text("mine/notes.txt")], needles=("notes.txt",))
    add(g, "report", "ev", "--out", "ev", setup=good, needles=("pong-0.training.json",))
    add(
        g,
        "report",
        "ev",
        "--out",
        "gone",
        setup=[*good, replace_with("gone", "link")],
        needles=("a link to",),
    )
    add(g, "report", "ev", "--out", "r" * 300, setup=good, needles=("File name too long",))
    add(g, "report", "ev", "--out", "ro/r", setup=[*good, folder("ro", 0o555)], read_only_binds=True,
        needles=("not writable",))  # fmt: skip
    add(g, "report", "ev", "--out", "afile/r", setup=[*good, text("afile")], needles=("afile",))

    g = "report: nothing to report"
    add(g, "report", "run", "--out", "r", setup=[run_copy()], needles=("no finished game",))
    add(g, "report", "ev", "--out", "r", "--games", "Breakout", setup=good, needles=("Breakout (--games)",))

    g = "report: CSV cells"
    works = {"expect": "clean", "exit_code": 0, "check": no_formula, "writes_nothing": False}
    names = [record("a", algo="=cmd|' /C calc'!A0"), record("b", algo="@sum(1)"), record("c", algo="+1-1")]
    add(g, "report", "ev", "--out", "r", "--reps", "20", setup=names, **works)
    add(g, "report", "ev", "--out", "r", "--reps", "20", "--group=-2+3=a", "--group", "@x=b,=c",
        setup=names, **works)  # fmt: skip
    add(g, "report", "ev", "--out", "r", "--reps", "20", "--group", 'A=a,"=HYPERLINK(1)"', "--group", "B=b",
        setup=names, **works)  # fmt: skip

    g = "eval: --out"
    twins = [run_copy("a/run"), run_copy("b/run")]
    add(g, "eval", "a/run", "b/run", "--episodes", "1", "--out", "ev", setup=twins, needles=("would both",))
    add(g, "eval", "a/run", "a/run", "--episodes", "1", "--out", "ev", setup=twins, needles=("given twice",))
    add(g, "eval", "a/run", "--episodes", "1", "--out", "/proc/ev", setup=twins, needles=("/proc",))
    add(g, "eval", "a/run", "--episodes", "1", "--out", "ro/ev", setup=[*twins, folder("ro", 0o555)],
        read_only_binds=True, needles=("not writable",))  # fmt: skip
    add(g, "eval", "a/run", "--episodes", "1", "--out", "ev", setup=[*twins, folder("ev/run.training.json")],
        needles=("is a folder where the eval record",))  # fmt: skip
    long = "r" * 245  # a run name that fits, a record name (<run>.training.json) that does not
    add(g, "eval", long, "--episodes", "1", "--out", "ev", setup=[run_copy(long)], needles=("too long",))
    return cases


@pytest.mark.parametrize("case", params(ci_first(report_cases())))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
