"""The one rule for the cells of every CSV the kit writes: none is a cell a spreadsheet would evaluate.

A spreadsheet that opens a CSV reads a cell starting with ``=``, ``+``, ``-`` or ``@`` (or a tab or a
carriage return before one) as a formula (OWASP, "CSV Injection"): a run name from an eval record, a
``--group`` name or a column of a log could run ``=cmd|...`` on the machine of whoever opens the file. Every
writer of a CSV (the report's tables, progress.csv, evaluations.csv, the RLlib engine's logs) passes its
cells, header included, through :func:`csv_row`. The bottom layer beside ``errors`` and ``files``: it imports
nothing of the kit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_FORMULA_START = frozenset("=+-@\t\r\n")
# a number as the kit writes one ("-21", "-20.5", "1e-05"): a spreadsheet reads it as a number, not a formula
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: object) -> object:
    """``value`` as a CSV cell that no spreadsheet evaluates: a string starting (after spaces) with ``=``,
    ``+``, ``-``, ``@``, a tab, a carriage return or a line feed gets a leading ``'``, the mark spreadsheets
    read as "this is text". Numbers, and strings that are plain numbers (``-21``, ``1e-05``), stay as they
    are; so does every other string."""
    if not isinstance(value, str):
        return value
    if value.lstrip(" ")[:1] in _FORMULA_START and not _PLAIN_NUMBER.fullmatch(value.strip()):
        return "'" + value
    return value


def csv_row(values: Iterable[object]) -> list[object]:
    """:func:`csv_cell` of every value of a row."""
    return [csv_cell(v) for v in values]
