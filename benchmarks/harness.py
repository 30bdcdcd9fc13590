"""The one harness of the hand-run benchmarks: rounds, medians, ratios, CPU accounting, tables, options.

Every benchmark here compares contenders on a shared, noisy machine, so every one measures the same way:

- **rounds**: each round measures every contender once, in a fixed order, so a slow spell of the machine
  hits all of them (``alternate``); a budget in seconds may stop rounds early (at least one runs);
- **medians**: a contender's figure is the median of its rounds; a ratio is the median of the per-round
  ratios against a named baseline (the two ran back to back), not a ratio of medians (``Samples``);
- **CPU**: wall time, CPU time of this process (every thread) and of its live child processes, and cores
  busy = CPU / wall (``CpuMeter``);
- **tables**: markdown, printed as they are made and written whole to ``--out`` (``Report``);
- **options**: ``--rounds`` (alias ``--repeats``), ``--out``, ``--quick`` (``add_common_options``).

Nothing here imports the kit or a framework: a benchmark's child process may load another revision of
the kit after importing this module (``native_ab.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


# -- rounds and medians ---------------------------------------------------------------------------------
class Samples:
    """Measurements by cell (a contender, or a (contender, size) pair ...), each tagged with its round.

    A value is a number, or a tuple or dict of them (``field`` picks one; a figure that is None was not
    measured and is left out). A cell that raised is not measured again (``errors``; its traceback went to
    stderr), so one broken contender costs only its cell."""

    def __init__(self) -> None:
        self.values: dict[Hashable, dict[int, Any]] = {}
        self.errors: dict[Hashable, BaseException] = {}
        self.rounds = 0

    def add(self, key: Hashable, value: Any, round_: int | None = None) -> None:
        self.values.setdefault(key, {})[self.rounds if round_ is None else round_] = value

    def of(self, key: Hashable, field: Hashable | None = None) -> list[float]:
        """The cell's figures in round order."""
        by_round = self.values.get(key, {})
        return [v for v in (_pick(by_round[r], field) for r in sorted(by_round)) if v is not None]

    def median(self, key: Hashable, field: Hashable | None = None) -> float | None:
        values = self.of(key, field)
        return statistics.median(values) if values else None

    def ratios(self, key: Hashable, baseline: Hashable, field: Hashable | None = None) -> list[float]:
        """``key / baseline`` in every round where both were measured (a zero baseline is skipped)."""
        mine, base = self.values.get(key, {}), self.values.get(baseline, {})
        out = []
        for r in sorted(mine.keys() & base.keys()):
            a, b = _pick(mine[r], field), _pick(base[r], field)
            if a is not None and b:
                out.append(a / b)
        return out

    def median_ratio(self, key: Hashable, baseline: Hashable, field: Hashable | None = None) -> float | None:
        """The median of the per-round ratios ``key / baseline``: each pair ran back to back, so a load
        change between rounds cancels out."""
        ratios = self.ratios(key, baseline, field)
        return statistics.median(ratios) if ratios else None


def _pick(value: Any, field: Hashable | None) -> float | None:
    return value if field is None else value[field]


class Clock:
    """A whole run's time budget (seconds): ``alternate`` starts no round that would overrun it."""

    def __init__(self, total: float = math.inf) -> None:
        self.start = time.monotonic()
        self.total = total

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.total - self.elapsed()


def alternate(
    cells: Mapping[Hashable, Callable[[], Any]],
    rounds: int,
    *,
    samples: Samples | None = None,
    budget: float | None = None,
    clock: Clock | None = None,
    catch: bool = False,
    show: Callable[[Hashable, Any], str] | None = None,
) -> Samples:
    """Measure every cell once per round, in ``cells``' order, for ``rounds`` rounds.

    ``budget`` (seconds) and ``clock`` (the run's total) stop it early: after each round, another starts
    only if one as long as the last still fits both (at least one round always runs). ``catch``: a cell
    that raises is recorded in ``samples.errors`` and skipped from then on, instead of ending the run.
    ``show(key, value)``: a line printed after each measurement (per-round figures, for the log)."""
    samples = samples if samples is not None else Samples()
    end = None if budget is None else time.monotonic() + budget
    for _ in range(rounds):
        t0 = time.monotonic()
        for key, fn in cells.items():
            if key in samples.errors:
                continue
            try:
                value = fn()
            except Exception as exc:
                if not catch:
                    raise
                samples.errors[key] = exc
                traceback.print_exc(file=sys.stderr)
                continue
            samples.add(key, value)
            if show is not None:
                print(f"  round {samples.rounds}: {show(key, value)}", flush=True)
        samples.rounds += 1
        took = time.monotonic() - t0
        if (end is not None and time.monotonic() + took > end) or (clock is not None and clock.left() < took):
            break
    return samples


# -- CPU time -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Usage:
    """One timed window: wall seconds, CPU seconds (this process's threads and its child processes)."""

    wall: float
    cpu: float

    @property
    def cores_busy(self) -> float:
        """Average cores busy over the window: CPU / wall."""
        return self.cpu / self.wall if self.wall > 0 else 0.0


def _process_cpu(pids: Iterable[int]) -> dict[int, float]:
    """User + system CPU seconds of each live process among ``pids`` (gone ones are left out)."""
    import psutil

    out = {}
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        out[pid] = times.user + times.system
    return out


def _children() -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process().children(recursive=True)]
    except psutil.Error:
        return []


class CpuMeter:
    """Wall and CPU time of a window: ``with CpuMeter() as m: ...`` then ``m.usage``.

    CPU is ``time.process_time()`` (every thread of this process) plus the user + system time of every
    process that is a live descendant of this one at the window's start or end (env workers, a play
    process, a forkserver and its children) and of ``pids``. A child that exits inside the window counts
    not at all."""

    def __init__(self, pids: Iterable[int | None] = ()) -> None:
        self.pids = [p for p in pids if p is not None]  # a pool's worker not started yet has no pid
        self.usage: Usage | None = None

    def _others(self) -> dict[int, float]:
        own = os.getpid()
        return _process_cpu(p for p in dict.fromkeys([*_children(), *self.pids]) if p != own)

    def __enter__(self) -> CpuMeter:
        self._others0 = self._others()
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        wall, cpu = time.perf_counter() - self._wall0, time.process_time() - self._cpu0
        others = self._others()
        # a child seen at both ends: its CPU in between; born inside: all of its CPU; gone: nothing
        cpu += sum(t - self._others0.get(pid, 0.0) for pid, t in others.items())
        self.usage = Usage(wall=wall, cpu=cpu)


# -- markdown -------------------------------------------------------------------------------------------
def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A markdown table's lines (cells ``str()``-ed; format numbers first with ``num`` / ``ratio``)."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
    ]


def num(value: float | None) -> str:
    """A figure for a table: thousands separated, no decimals from 100 up, one below; ``-`` if missing."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def ratio(value: float | None, digits: int = 2) -> str:
    """A ratio for a table, ``1.23x``; ``-`` if missing."""
    return "-" if value is None else f"{value:.{digits}f}x"


def each(values: Iterable[float], digits: int = 1) -> str:
    """Per-round figures for a log line: ``1.0, 2.5``."""
    return ", ".join(f"{v:.{digits}f}" for v in values)


class Report:
    """The markdown a benchmark prints, kept to be written whole to ``--out`` at the end."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.failed = False

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)
        print(*lines, sep="\n", flush=True)

    def table(self, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        self.add(*table(header, rows), "")

    def error(self, what: str, exc: BaseException) -> None:
        """Record a measurement that raised (its traceback went to stderr when it was caught)."""
        self.failed = True
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        self.add(f"- error in {what}: {text[0][:160] if text else type(exc).__name__}")

    def errors(self, samples: Samples, what: str) -> None:
        for key, exc in samples.errors.items():
            self.error(f"{what} {key}", exc)

    def write(self, out: str | os.PathLike | None) -> None:
        """The report to ``out`` (nothing if None), atomically: a report file is either whole or absent."""
        if out is None:
            return
        path = Path(out)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("\n".join(self.lines) + "\n")
        os.replace(tmp, path)
        print(f"report written to {path}", file=sys.stderr)


# -- command line ---------------------------------------------------------------------------------------
def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser whose ``--help`` is the script's docstring, as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_common_options(
    p: argparse.ArgumentParser,
    *,
    rounds: int = 3,
    out: str | None = None,
    quick: str = "the smallest settings: checks that it runs, the figures mean nothing",
) -> argparse.ArgumentParser:
    """``--rounds`` / ``--repeats`` (the same option), ``--out``, ``--quick``; ``quick`` says what it does."""
    p.add_argument(
        "--rounds",
        "--repeats",
        dest="rounds",
        type=_positive,
        default=rounds,
        help=f"rounds: each measures every contender once, in turn; medians are reported (default {rounds})",
    )
    p.add_argument(
        "--out",
        default=out,
        metavar="PATH",
        help="also write the markdown report there" + (f" (default {out})" if out else ""),
    )
    p.add_argument("--quick", action="store_true", help=quick)
    return p


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def load_average() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())
