"""What a sweep case checks after its command beyond the one line and the unchanged folder: a check takes
(the case's folder, its output, the run's checkpoint steps when a signal was sent) and returns the problems
found (none: the case passed)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.sweep._setups import FIXTURE, MARKER, Check

CHECKPOINT_NAME = re.compile(r"^model_(\d+)_steps(\.zip)?$")


def checkpoint_steps(run: Path) -> list[int]:
    try:
        names = os.listdir(run / "checkpoints")
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(CHECKPOINT_NAME.match, names) if m)


def leftovers(run: Path) -> list[str]:
    """Temporaries of atomic writes and the lock: none may outlive a command."""
    return sorted(p.name for p in run.rglob(".*") if ".tmp-" in p.name or p.name == ".train.pid")


def stopped_and_saved(run: str = "run", says_so: bool = True) -> Check:
    """A stop checkpoint past every checkpoint there was when the signal was sent, and (``says_so``: stdout
    can be read) the line saying so."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        steps = checkpoint_steps(d / run)
        if not steps or (before and steps[-1] <= before[-1]):
            return [f"no stop checkpoint past {before[-1] if before else 'none'} (have {steps[-3:]})"]
        said = not says_so or f"interrupted at {steps[-1]} steps" in output
        problems = [] if said else ["no 'interrupted at' line"]
        return problems + [f"left {name}" for name in leftovers(d / run)]

    return check


def trained_to(steps: int, *needles: str, run: str = "run") -> Check:
    """The run's newest checkpoint is at ``steps`` (it finished), the output has ``needles``."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        have = checkpoint_steps(d / run)
        problems = [] if have and have[-1] == steps else [f"newest checkpoint {have[-1:]} not {steps}"]
        problems += [f"output lacks {needle!r}" for needle in needles if needle not in output]
        return problems + [f"left {name}" for name in leftovers(d / run)]

    return check


def error_line(*needles: str) -> Check:
    """The output ends in one ``retrokit: error:`` line with ``needles`` (a command that got as far as
    training: the progress bar is on stderr too)."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        errors = [line for line in output.splitlines() if line.startswith("retrokit: error: ")]
        if len(errors) != 1:
            return [f"{len(errors)} 'retrokit: error:' lines, not 1"]
        return [f"line lacks {needle!r}" for needle in needles if needle not in errors[0]]

    return check


def kept(name: str, of: str) -> Check:
    """``name`` in the case's folder has the fixture run's ``of``, byte for byte (a checkpoint saved
    before the fault is intact)."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        path = d / name
        same = path.is_file() and path.read_bytes() == (Path(FIXTURE["run"]) / of).read_bytes()
        return [] if same else [f"{name} lost or changed"]

    return check


def absent(name: str) -> Check:
    def check(d: Path, output: str, before: list[int]) -> list[str]:
        return [f"{name} was left"] if os.path.lexists(d / name) else []

    return check


def no_leftovers(run: str) -> Check:
    def check(d: Path, output: str, before: list[int]) -> list[str]:
        return [f"left {name}" for name in leftovers(d / run)] if (d / run).is_dir() else []

    return check


def made(name: str) -> Check:
    def check(d: Path, output: str, before: list[int]) -> list[str]:
        return [] if (d / name).is_file() and (d / name).stat().st_size > 0 else [f"{name} not written"]

    return check


def all_of(*checks: Check) -> Check:
    def check(d: Path, output: str, before: list[int]) -> list[str]:
        return [problem for c in checks for problem in c(d, output, before)]

    return check


def no_marker(d: Path, output: str, before: list[int]) -> list[str]:
    return [f"{MARKER} exists: a pickle from the run dir ran"] if (d / MARKER).exists() else []


def quiet_plot(d: Path, output: str, before: list[int]) -> list[str]:
    return ["matplotlib's cache warning"] if "Matplotlib" in output or "mkdir -p failed" in output else []


def says(*needles: str, once: str | None = None) -> Check:
    """The output has every needle, and ``once`` exactly once."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        problems = [f"output lacks {needle!r}" for needle in needles if needle not in output]
        if once is not None and output.count(once) != 1:
            problems.append(f"{once!r} {output.count(once)} times, not once")
        return problems

    return check
