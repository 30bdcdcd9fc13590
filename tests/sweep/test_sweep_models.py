"""``retrokit eval`` / ``record`` / ``export`` of runs and model files that are missing, damaged or
foreign."""

from __future__ import annotations

import pytest

from tests.sweep._setups import damage, folder, foreign_zip, run_copy, set_field, text, truncated_model
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


# the same command in tests/cli/test_cli_errors.py, there with the message's words: that test is kept
EXPECTS = "test_eval_mistakes_say_what_the_model_expects"
OUT = "test_record_checks_out_before_playing"
MODEL = "test_a_model_file_that_cannot_load_is_the_only_line"
READ_ONLY = "test_record_and_plot_refuse_a_read_only_folder"
IN_TESTS_CLI = {
    "retrokit eval run --env RetroKit/Breakout-v0": EXPECTS,
    "retrokit eval run --env-kwarg frame_stack=2": EXPECTS,
    "retrokit eval run --device tpu": EXPECTS,
    "retrokit eval run --seed -1": EXPECTS,
    "retrokit record run --out x.txt": OUT,
    "retrokit record run --out videos [folder videos]": OUT,
    "retrokit record run --out missing/a.mp4": OUT,
    "retrokit record run --out ro/a.mp4 [folder ro mode 555]": READ_ONLY,
    f"retrokit eval model.zip --env {ENV} [file model.zip]": MODEL,
    f"retrokit eval model.zip --env {ENV} [model.zip: a model cut short]": MODEL,
    f"retrokit eval model.zip --env {ENV} [model.zip: a foreign zip]": MODEL,
    "retrokit eval model.zip [file model.zip]": MODEL,
    f"retrokit record model.zip --env {ENV} --out a.mp4 [model.zip: a foreign zip]": MODEL,
}


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
            # a run stopped before its end has no model.zip: the line names its latest checkpoint
            Case(
                g,
                [cmd, "run/model.zip", *extra],
                setup=[run_copy(), damage("model.zip", "remove")],
                needles=("model_64_steps.zip (64 steps)", "pass the run dir run"),
            ),  # fmt: skip
            Case(g, [cmd, "run/modle.zip", *extra], setup=good, needles=("final model at run/model.zip",)),
            Case(g, [cmd, "runs/model.zip", *extra], setup=good, needles=("did you mean run/model.zip?",)),
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


@pytest.mark.parametrize("case", params(ci_first(without(model_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
