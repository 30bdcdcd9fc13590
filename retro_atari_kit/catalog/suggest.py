""" "Did you mean": the IDs or game names a mistyped or partial name most likely stands for.

A user who types part of a name (``Sonic``, ``mortal kombat``) wants the names that contain it; difflib's
fuzzy matching alone misses those (``Sonic`` is too short to be "close" to ``RetroKit/SonicTheHedgehog-
Genesis-v0``) and finds them for typos only. So names that contain the text come first, then difflib's.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

__all__ = ["close_names", "contains", "did_you_mean"]

# at most this many names in one "did you mean" (the rest are counted, with a way to list them)
SHOWN = 8


def _squash(text: str) -> str:
    """Lower case, letters and digits only: ``"Sonic the-Hedgehog"`` and ``"SonicTheHedgehog"`` compare
    equal."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _bare(name: str) -> str:
    """The game part of an ID (``RetroKit/Pong-v0`` -> ``Pong-v0``)."""
    return name.rsplit("/", 1)[-1]


def contains(name: str, text: str) -> bool:
    """Whether ``name`` contains ``text``, case, spaces and punctuation ignored (``retrokit list``)."""
    key = _squash(text)
    return bool(key) and key in _squash(name)


def _typo_of(key: str, name: str) -> bool:
    """Whether some stretch of ``name`` is one typo from ``key`` (an inserted, missing, wrong or swapped
    letter; two typos for keys of 8 or more letters). Keys under five letters never are: four letters are
    one typo from too much.

    One edit-distance table per name whose first row is all zeros, so a match may start anywhere in the
    name, and whose last row's minimum is the distance to the closest stretch (Sellers' algorithm)."""
    if len(key) < 5:
        return False
    limit = 1 if len(key) < 8 else 2
    before: list[int] | None = None
    row = [0] * (len(name) + 1)
    for i in range(1, len(key) + 1):
        current = [i] + [0] * len(name)
        for j in range(1, len(name) + 1):
            cost = row[j - 1] + (key[i - 1] != name[j - 1])
            current[j] = min(row[j] + 1, current[j - 1] + 1, cost)
            if before is not None and j > 1 and key[i - 1] == name[j - 2] and key[i - 2] == name[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return False
        before, row = row, current
    return min(row) <= limit


def close_names(text: str, names: Sequence[str]) -> tuple[list[str], int]:
    """``(suggestions, number of names containing text)``. First the names that contain ``text`` (case,
    spaces and punctuation ignored), those whose game part starts with it first, each group in name order;
    then names with a stretch one typo away (``sonik``); then difflib's close matches of the whole name.
    Empty when nothing is near."""
    key = _squash(text)
    inside = [n for n in names if contains(n, text)]
    inside.sort(key=lambda n: (not _squash(_bare(n)).startswith(key), n.lower()))
    taken = set(inside)
    typos = []  # only worth the search when the names containing the text do not fill the line
    if len(inside) < SHOWN:
        typos = sorted((n for n in names if n not in taken and _typo_of(key, _squash(n))), key=str.lower)
    taken.update(typos)
    fuzzy = [n for n in difflib.get_close_matches(text, list(names), n=3, cutoff=0.5) if n not in taken]
    return inside + typos + fuzzy, len(inside)


def did_you_mean(text: str, names: Sequence[str], more_hint: str = "") -> str:
    """``"; did you mean A, B?"`` for an error line, or ``""`` when nothing is near. Past :data:`SHOWN`
    names the rest are counted, followed by ``more_hint`` (e.g. ``"retrokit list sonic"``)."""
    close, inside = close_names(text, names)
    if not close:
        return ""
    shown = ", ".join(close[:SHOWN])
    rest = len(close) - SHOWN
    if rest > 0:
        # the hint lists the names that contain the text: give it only when they are what is cut off
        hint = f" (`{more_hint}`)" if more_hint and inside > SHOWN else ""
        shown += f" and {rest} more{hint}"
    return f"; did you mean {shown}?"
