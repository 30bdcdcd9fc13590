"""The one rule for CSV cells: what a spreadsheet would evaluate is text, numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pytest

from retro_atari_kit.csv_cells import csv_cell, csv_row


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("@SUM(1+1)", "'@SUM(1+1)"),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("\n=1", "'\n=1"),
        ("  =1", "'  =1"),
        ("-inf", "'-inf"),
        ("Pong", "Pong"),
        ("PPO nature", "PPO nature"),
        ("", ""),
        ("'=x", "'=x"),
        ("-21", "-21"),
        ("+21", "+21"),
        ("-20.5", "-20.5"),
        ("1e-05", "1e-05"),
        (-21, -21),
        (-20.5, -20.5),
        (None, None),
        (True, True),
    ],
)
def test_a_cell_is_text_or_a_number_never_a_formula(value, cell):
    assert csv_cell(value) == cell
    assert type(csv_cell(value)) is type(cell)  # numbers are not turned into text


def test_a_row_written_with_the_csv_module_reads_back_as_text_and_numbers():
    buf = io.StringIO()
    csv.writer(buf).writerow(csv_row(["=1+1", -21, "-21", "a,=b"]))
    assert next(csv.reader(io.StringIO(buf.getvalue()))) == ["'=1+1", "-21", "-21", "a,=b"]
