"""The benchmarks' shared harness (benchmarks/harness.py): rounds, medians of per-round ratios, CPU
accounting, tables and options, on tiny real functions. Speeds are never asserted, only the bookkeeping."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(ROOT))  # `benchmarks` is a folder of the repository, not an installed package
    try:
        from benchmarks import harness

        yield harness
    finally:
        sys.path.remove(str(ROOT))


def _feed(values):
    """A cell returning ``values`` one per call."""
    it = iter(values)
    return lambda: next(it)


def test_rounds_alternate_every_cell_in_order(harness):
    calls = []
    cells = {name: (lambda name=name: calls.append(name) or len(calls)) for name in ("a", "b", "c")}
    samples = harness.alternate(cells, 3)
    assert calls == ["a", "b", "c"] * 3  # round-robin, not a's three rounds first
    assert samples.rounds == 3
    assert samples.of("a") == [1, 4, 7] and samples.of("c") == [3, 6, 9]
    assert samples.median("b") == 5


def test_ratio_is_the_median_of_per_round_ratios_not_the_ratio_of_medians(harness):
    # the machine slows down in round 1 (both halve); the kit is 2x the baseline in every round
    cells = {"kit": _feed([20.0, 10.0, 30.0]), "base": _feed([10.0, 5.0, 15.0]), "none": _feed([0.0] * 3)}
    samples = harness.alternate(cells, 3)
    assert samples.ratios("kit", "base") == [2.0, 2.0, 2.0]
    assert samples.median_ratio("kit", "base") == 2.0
    # rounds 0 and 2 only: per-round ratios 1.0 and 3.0 -> median 2.0; the medians alone would say 1.6
    samples2 = harness.Samples()
    for r, (a, b) in enumerate([(10.0, 10.0), (99.0, 1.0), (30.0, 10.0)]):
        samples2.add("a", a, r)
        if r != 1:
            samples2.add("b", b, r)
    assert samples2.ratios("a", "b") == [1.0, 3.0]  # round 1 has no baseline: left out
    assert samples2.median_ratio("a", "b") == 2.0
    assert samples2.median("a") / samples2.median("b") == 3.0
    assert samples.ratios("kit", "none") == [] and samples.median_ratio("kit", "none") is None
    assert samples.median_ratio("kit", "missing") is None and samples.median("missing") is None


def test_fields_of_tuple_and_dict_values_and_unmeasured_figures(harness):
    samples = harness.Samples()
    for r, (sps, busy) in enumerate([(100.0, 1.0), (300.0, 2.0), (200.0, 1.5)]):
        samples.add("t", (sps, busy), r)
        samples.add("d", {"sps": sps / 2, "sample": None}, r)
    assert samples.of("t", 0) == [100.0, 300.0, 200.0] and samples.median("t", 1) == 1.5
    assert samples.median("d", "sps") == 100.0
    assert samples.of("d", "sample") == [] and samples.median("d", "sample") is None


def test_a_cell_that_raises_is_recorded_once_and_skipped_after(harness, capsys):
    calls = []

    def broken():
        calls.append("broken")
        raise ValueError("no emulator")

    cells = {"ok": _feed([1.0, 2.0, 3.0]), "broken": broken}
    samples = harness.alternate(cells, 3, catch=True)
    assert calls == ["broken"] and samples.of("ok") == [1.0, 2.0, 3.0]
    assert list(samples.errors) == ["broken"] and "ValueError: no emulator" in capsys.readouterr().err
    report = harness.Report()
    report.errors(samples, "env")
    assert report.failed and report.lines == ["- error in env broken: ValueError: no emulator"]
    with pytest.raises(ValueError, match="no emulator"):
        harness.alternate({"broken": broken}, 1)  # without catch: the run stops


def test_a_budget_stops_rounds_but_at_least_one_runs(harness):
    slow = {"a": lambda: time.sleep(0.05) or 1.0}
    assert harness.alternate(slow, 5, budget=0.01).rounds == 1
    assert harness.alternate(slow, 5, clock=harness.Clock(0.0)).rounds == 1  # the whole run's time is spent
    assert harness.alternate({"a": lambda: 1.0}, 4, budget=60.0, clock=harness.Clock(60.0)).rounds == 4


def test_usage_and_cores_busy(harness):
    assert harness.Usage(wall=2.0, cpu=3.0).cores_busy == 1.5
    assert harness.Usage(wall=0.0, cpu=1.0).cores_busy == 0.0
    with harness.CpuMeter() as meter:
        time.sleep(0.2)  # sleeping uses no CPU: wall without CPU
    assert meter.usage.wall >= 0.2 and meter.usage.cpu < 0.1


def test_cpu_counts_a_child_process(harness):
    """A child born inside the window, still alive at its end, brings all its CPU time."""
    busy = (
        "import sys, time\n"
        "while time.process_time() < 0.4: pass\n"
        "print('done', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with harness.CpuMeter() as meter:
        child = subprocess.Popen(
            [sys.executable, "-c", busy], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout.readline() == "done\n"
        except BaseException:
            child.kill()
            raise
    child.communicate("")
    # the child's own 0.4 s, less what /proc's clock ticks (10 ms each, sampled) may not have counted yet
    assert meter.usage.cpu >= 0.3
    # a process given by pid counts the same, and a pool's None pid (a worker not started) is ignored
    assert harness.CpuMeter(pids=[None, 1]).pids == [1]


def test_markdown_and_figures(harness, tmp_path):
    assert harness.table(["contender", "N=2"], [["kit", "1,234"], ["raw", 5]]) == [
        "| contender | N=2 |",
        "|---|---|",
        "| kit | 1,234 |",
        "| raw | 5 |",
    ]
    assert [harness.num(v) for v in (12345.6, 100.0, 99.94, 0.04, None)] == [
        "12,346",
        "100",
        "99.9",
        "0.0",
        "-",
    ]
    assert [harness.ratio(v) for v in (1.0, 0.456, None)] == ["1.00x", "0.46x", "-"]
    assert harness.ratio(1.23456, 3) == "1.235x" and harness.each([1.0, 2.25]) == "1.0, 2.2"
    report = harness.Report()
    report.add("## Section", "")
    report.table(["a", "b"], [[1, 2]])
    out = tmp_path / "report.md"
    report.write(out)
    assert out.read_text() == "## Section\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]  # no temporary file left behind
    report.write(None)  # no --out: nothing written, nothing raised


def test_common_options(harness, capsys):
    p = harness.add_common_options(harness.parser("doc"), rounds=5)
    assert vars(p.parse_args([])) == {"rounds": 5, "out": None, "quick": False}
    assert p.parse_args(["--repeats", "2"]).rounds == 2  # the older name of the same option
    args = p.parse_args(["--rounds", "7", "--out", "x.md", "--quick"])
    assert (args.rounds, args.out, args.quick) == (7, "x.md", True)
    assert p.description == "doc"
    with pytest.raises(SystemExit):
        p.parse_args(["--rounds", "0"])
    assert capsys.readouterr().err.endswith("argument --rounds/--repeats: must be at least 1, got 0\n")
