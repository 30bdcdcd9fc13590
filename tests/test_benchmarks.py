"""The hand-run benchmark scripts still start: their imports resolve and their arguments parse.

They are run by hand, never timed here (docs/performance.md has the figures); this only keeps them from
rotting unnoticed when the kit's API changes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))


def test_every_benchmark_is_listed_in_the_performance_docs():
    docs = (BENCHMARKS.parent / "docs" / "performance.md").read_text()
    assert SCRIPTS, "no benchmark scripts found"
    assert [s for s in SCRIPTS if f"benchmarks/{s}" not in docs] == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_help(script):
    proc = subprocess.run(
        [sys.executable, script, "--help"], cwd=BENCHMARKS, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ")
