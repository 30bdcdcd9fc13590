"""``retrokit eval`` / ``record`` / ``export`` of runs and model files that are missing, damaged or
foreign."""

from __future__ import annotations

import pytest

from tests.sweep._sweep import (
    Case,
    check,
    ci_first,
    damage,
    folder,
    foreign_zip,
    params,
    run_copy,
    set_field,
    text,
    truncated_model,
)

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


def model_cases() -> list[Case]:
    """eval / record / export of runs and model files."""
    cases: list[Case] = []
    good = [run_copy()]
    rom = "{missing_rom}"
    for cmd in ("eval", "record"):
        g = f"{cmd}: targets"
        extra = ["--out", "a.mp4"] if cmd == "record" else []
        cases += [
            Case(g, [cmd, "missing", *extra]),
            Case(g, [cmd, "empty", *extra], setup=[folder("empty")]),
            Case(g, [cmd, "notes.txt", "--env", ENV, *extra], setup=[text("notes.txt")]),
            Case(g, [cmd, "model.zip", *extra], setup=[text("model.zip")], needles=("--env",)),
            Case(g, [cmd, "model.zip", "--env", ENV, *extra], setup=[text("model.zip")]),
            Case(g, [cmd, "model.zip", "--env", ENV, *extra], setup=[truncated_model("model.zip")]),
            Case(g, [cmd, "model.zip", "--env", ENV, *extra], setup=[foreign_zip("model.zip")]),
            Case(g, [cmd, "run", *extra], setup=[run_copy(), damage("model.zip", "text")]),
            Case(g, [cmd, "run", *extra], setup=[run_copy(), damage("config.yaml", "text")]),
            Case(g, [cmd, "run", *extra], setup=[run_copy(), set_field("engine", "bogus")]),
            Case(
                g,
                [cmd, "run", *extra],
                setup=[run_copy(), damage("model.zip", "remove"), damage("checkpoints/*.zip", "remove")],
            ),  # fmt: skip
            Case(
                g,
                [cmd, "run", *extra],
                setup=[run_copy(), damage("model.zip", "truncate"), damage("checkpoints/*.zip", "truncate")],
            ),  # fmt: skip
        ]
        g = f"{cmd}: options"
        cases += [
            Case(g, [cmd, "run", *extra, "--episodes", "0"], setup=good, needles=("--episodes",)),
            Case(g, [cmd, "run", *extra, "--episodes", "abc"], setup=good, needles=("--episodes",)),
            Case(g, [cmd, "run", *extra, "--seed", "abc"], setup=good, needles=("--seed",)),
            Case(g, [cmd, "run", *extra, "--seed", "-1"], setup=good, needles=("--seed",)),
            Case(g, [cmd, "run", *extra, "--env", "RetroKit/Bogus-v0"], setup=good),
            Case(g, [cmd, "run", *extra, "--env", "Pong-v0"], setup=good, needles=("RetroKit/Pong-v0",)),
            Case(g, [cmd, "run", *extra, "--env", "RetroKit/Breakout-v0"], setup=good, needles=("expects",)),
            Case(g, [cmd, "run", *extra, "--env", rom], setup=good, needles=("import-roms",)),
            Case(g, [cmd, "run", *extra, "--device", "tpu"], setup=good, needles=("unknown device",)),
            Case(g, [cmd, "run", *extra, "--device", "cuda:7"], setup=good, needles=("cuda:7",)),
        ]
    g = "eval: options"
    cases += [
        Case(g, ["eval", "run", "--env-kwarg", "frame_stack=2"], setup=good, needles=("expects",)),
        Case(g, ["eval", "run", "--env-kwarg", "bogus=1"], setup=good, needles=("bogus",)),
        Case(g, ["eval", "run", "--env-kwarg", "crop_score"], setup=good, needles=("--env-kwarg",)),
        Case(g, ["eval", "run", "--episodes", "-3"], setup=good, needles=("--episodes",)),
    ]
    g = "record: --out"
    cases += [
        Case(g, ["record", "run", "--out", "x.txt"], setup=good, needles=(".mp4",)),
        Case(g, ["record", "run", "--out", "videos"], setup=[*good, folder("videos")], needles=("folder",)),
        Case(g, ["record", "run", "--out", "videos.mp4"], setup=[*good, folder("videos.mp4")]),
        Case(g, ["record", "run", "--out", "missing/a.mp4"], setup=good, needles=("does not exist",)),
        Case(g, ["record", "run", "--out", "afile/a.mp4"], setup=[*good, text("afile")]),
        Case(
            g,
            ["record", "run", "--out", "ro/a.mp4"],
            setup=[*good, folder("ro", 0o555)],
            read_only_binds=True,
            needles=("not writable",),
        ),  # fmt: skip
        Case(g, ["record", "run", "--out", ""], setup=good),
        Case(g, ["record", "run", "--max-steps", "0"], setup=good, needles=("--max-steps",)),
        Case(g, ["record", "run", "--max-steps", "abc"], setup=good, needles=("--max-steps",)),
        Case(g, ["record", "run", "--max-steps", "-1"], setup=good, needles=("--max-steps",)),
    ]
    g = "export"
    cases += [
        Case(g, ["export", "missing", "out"]),
        Case(g, ["export", "notes", "out"], setup=[text("notes/a.txt")]),
        Case(g, ["export", "run", "out"], setup=[*good, text("out/keep.txt")], needles=("out",)),
        Case(g, ["export", "run", "afile"], setup=[*good, text("afile")], needles=("afile",)),
        Case(g, ["export", "run", "missing/sub/out"], setup=good, needles=("does not exist",)),
        Case(
            g,
            ["export", "run", "ro/out"],
            setup=[*good, folder("ro", 0o555)],
            read_only_binds=True,
            needles=("not writable",),
        ),  # fmt: skip
        Case(g, ["export", "run", "run"], setup=good),
        Case(
            g,
            ["export", "run", "out"],
            setup=[run_copy(), damage("model.zip", "remove"), damage("checkpoints/*.zip", "remove")],
        ),  # fmt: skip
        Case(g, ["export", "run", "out"], setup=[run_copy(), damage("model.zip", "text")]),
        Case(g, ["export", "run", "out"], setup=[run_copy(), damage("config.yaml", "text")]),
    ]
    return cases


@pytest.mark.parametrize("case", params(ci_first(model_cases())))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
