"""``retrokit plot`` / ``list`` / ``import-roms`` / ``bench`` and the top level."""

from __future__ import annotations

import pytest

from tests.sweep._setups import DAMAGED_LOGS, DL, append_bytes, folder, monitor_csv, run_copy, text
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"
GOOD_CSV = '#{"t_start": 0, "env_id": "RetroKit/Pong-v0"}\nr,l,t\n-21.0,812,3.5\n-20.0,900,7.25\n'


# the same command in tests/cli/test_cli_errors.py, there with the message's words: that test is kept
ROWS = "test_plot_warns_about_rows_that_are_not_numbers"
IN_TESTS_CLI = {
    "retrokit plot run --out ro/c.png [folder ro mode 555]": "test_record_and_plot_refuse_a_read_only_folder",
    "retrokit plot run --out missing/c.png": "test_record_and_plot_refuse_a_read_only_folder",
    'retrokit plot run [run/monitor/0.monitor.csv: \'#{"t_start": 0, "env_id"\']': ROWS,
    "retrokit import-roms roms [folder roms mode 0]": "test_import_roms_of_an_unreadable_folder_is_refused",
    "retrokit ": "test_no_command_prints_the_help_and_one_error_line",
    "retrokit list": "test_a_reader_that_goes_away_gets_no_traceback",
}


def other_cases() -> list[Case]:
    cases: list[Case] = []
    g = "plot"
    good = [run_copy()]
    cases += [
        Case(g, ["plot", "missing"]),
        Case(g, ["plot", "afile"], setup=[text("afile")]),
        Case(g, ["plot", "empty"], setup=[folder("empty")], needles=("empty",)),
        Case(g, ["plot", "run", "--smooth", "0"], setup=good, needles=("--smooth",)),
        Case(g, ["plot", "run", "--smooth", "abc"], setup=good, needles=("--smooth",)),
        Case(g, ["plot", "run", "--smooth", "-3"], setup=good, needles=("--smooth",)),
        Case(g, ["plot", "run", "--x", "bogus"], setup=good, needles=("--x",)),
        Case(g, ["plot", "run", "--out", "c.jpg"], setup=good, needles=(".png",)),
        Case(g, ["plot", "run", "--out", "dir.png"], setup=[*good, folder("dir.png")]),
        Case(g, ["plot", "run", "--out", "missing/c.png"], setup=good, needles=("does not exist",)),
        Case(
            g,
            ["plot", "run", "--out", "ro/c.png"],
            setup=[*good, folder("ro", 0o555)],
            read_only_binds=True,
            needles=("not writable",),
        ),  # fmt: skip
        Case(
            g,
            ["plot", "run"],
            setup=[monitor_csv(GOOD_CSV + "abc,def,ghi\n,,\n")],
            expect="warning",
            writes_nothing=False,
            needles=("skipped 2 row",),
        ),  # fmt: skip
        # damaged logs never stop the plot: one warning line naming the file, the rest is plotted
        *(
            Case(
                g,
                ["plot", DL],
                setup=[monitor_csv(body, run=DL)],
                expect="warning",
                writes_nothing=False,
                needles=(f"{DL}/monitor/0.monitor.csv: {words}",),
            )
            for body, words in [
                ("", "empty"),
                ("garbage\n\x00\x01\x02\n", "not a monitor CSV"),
                ('#{"t_start": 0}\nx,y\n1,2\n', "not a monitor CSV"),
                (GOOD_CSV.replace("\nr,l,t", ""), "no r,l,t header line"),
                (GOOD_CSV.replace('"t_start": 0', '"t_start": null'), "no start time"),
            ]
        ),
        Case(
            g,
            ["plot", DL],
            setup=DAMAGED_LOGS,
            expect="warning",
            writes_nothing=False,
            needles=(f"{DL}/monitor/0.monitor.csv: skipped 2 row",),
        ),
        Case(
            g,
            ["plot", DL],
            setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/monitor/0.monitor.csv", b"", "wb")],
            expect="warning",
            writes_nothing=False,
            needles=(f"{DL}/monitor/0.monitor.csv: empty",),
        ),
        # a warning, and the run plotted with 0 games (as a run that has not finished a game yet)
        Case(
            g,
            ["plot", "run"],
            setup=[monitor_csv("r,l,t\nabc,def,ghi\n")],
            expect="warning",
            writes_nothing=False,
            needles=("skipped 1 row",),
        ),  # fmt: skip
    ]
    g = "list"
    cases += [
        Case(g, ["list", "--system", "bogus"], needles=("bogus",)),
        Case(g, ["list", "extra"]),
        Case(g, ["list"], expect="clean", close_stdout=True),
    ]
    g = "import-roms"
    cases += [
        Case(g, ["import-roms", "missing"]),
        Case(g, ["import-roms"]),
        # not ROMs: reported as skipped (exit 0), nothing installed or written
        Case(g, ["import-roms", "notes.txt"], setup=[text("notes.txt")], expect="clean"),
        Case(g, ["import-roms", "z"], setup=[text("z/bad.zip", b"PK\x03\x04garbage")], expect="clean"),
        Case(g, ["import-roms", "roms"], setup=[folder("roms", 0o000)], read_only_binds=True),
    ]
    g = "bench"
    rom = "{missing_rom}"
    cases += [
        Case(g, ["bench", "RetroKit/Bogus-v0"]),
        Case(g, ["bench", "Pong-v0"], needles=("RetroKit/Pong-v0",)),
        Case(g, ["bench", rom], needles=("import-roms",)),
        Case(g, ["bench", ENV, "--backends", "bogus"], needles=("bogus",)),
        Case(g, ["bench", ENV, "--n-envs", "0"], needles=("--n-envs",)),
        Case(g, ["bench", ENV, "--steps", "abc"], needles=("--steps",)),
    ]
    g = "top level"
    cases += [Case(g, []), Case(g, ["bogus"]), Case(g, ["--bogus"])]
    return cases


@pytest.mark.parametrize("case", params(ci_first(without(other_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
