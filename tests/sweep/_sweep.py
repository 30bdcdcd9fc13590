"""The sweep's machinery: a case is one ``retrokit`` command (or Python script) a user may run, the files it
finds in its folder, and what the user must see; :func:`check` runs it as a real process in a fresh folder.

A case expects one of:

- ``error``: exit code 2, exactly one line on stderr, starting ``retrokit: error:``;
- ``warning``: exit code 0, exactly one line on stderr, starting ``retrokit: warning:``;
- ``clean``: no traceback (for cases with no single right exit code, e.g. a closed stdout);
- ``interrupted``: exit code 130, exactly one line on stderr, starting ``retrokit: interrupted``, no run dir
  left (or, where training had begun when the signal came, exit 0 and a stop checkpoint);
- ``script``: a Python script (``argv`` is Python's), its exit code and output checked;
- ``api``: a bad call on the Python API, run by ``_api_child.py`` on every target (test_sweep_api.py);

and never ``Traceback`` on stdout or stderr. For cases that must write nothing (most of them), every file and
folder of the case's folder is as it was (contents and modification times), the run copies included.

The case folder's files come from ``setup`` steps, many of them copies of one tiny trained run (the session
fixture ``sweep`` in conftest.py builds it once per test process and records its path in :data:`FIXTURE`).
``argv`` may hold ``{missing_rom}`` (a stable-retro ID whose ROM is absent here) and ``{address:KIND}`` (the
services of ``not_ray_heads``), filled in when the case runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli._run import CHILD_ENV, RETROKIT, changed, child_env, file_modes_bind, snapshot
from tests.sweep._checks import checkpoint_steps, stopped_and_saved
from tests.sweep._setups import CASE_MOUNTS, FIXTURE, Check, Setup, chained

TIMEOUT_S = 120
API_TIMEOUT_S = 600  # an API case builds 8 vector envs (8 worker processes among them): minutes on busy cores
LIVE_TIMEOUT_S = 600  # start, train to a checkpoint, stop: Ray or a retro game take minutes on busy cores
STREAMS = {"stdout": 1, "stderr": 2}
API_CHILD = str(Path(__file__).with_name("_api_child.py"))


@dataclasses.dataclass
class Case:
    group: str
    argv: list[str]
    setup: list[Setup] = dataclasses.field(default_factory=list)
    expect: str = "error"  # error | warning | clean | interrupted | script | api
    needles: tuple[str, ...] = ()
    writes_nothing: bool = True
    read_only_binds: bool = False  # file modes bind the command even when it runs as root
    close_stdout: bool = False  # the reader of stdout goes away after the first line (`| head -1`)
    # the command in its own session: ``send_signal`` ("SIGTERM", ...) goes to its process group once
    # ``signal_when`` is met ("checkpoint": the run has one; else seconds after the start); ``closed``
    # streams are closed when it starts (`>&-`); ``exit_code`` is checked if set; ``check`` adds problems
    send_signal: str | None = None
    signal_when: str = "checkpoint"
    closed: tuple[str, ...] = ()
    exit_code: int | None = None
    check: Check | None = None
    # expect="api": ``argv`` is (kind, call, value, good|bad) for _api_child.py; ``agree`` says what every
    # target of one game must share: "message" (the same error line), "type" (its exception type), "none"
    agree: str = "message"
    # ``env`` is added to the command's environment (None removes a variable), ``stdout_to`` names the file
    # its stdout is written to (``/dev/full``)
    env: dict[str, str | None] | None = None
    stdout_to: str | None = None
    # run in the child just before the command (a real limit: ``rlimit(...)``; a deleted working folder)
    preexec: Callable[[], None] | None = None
    # CI runs this case (``-m "not sweep_full"``); the others run with ``-m sweep``
    ci: bool = False

    @property
    def label(self) -> str:
        if self.expect == "api":
            kind, call, value, good = self.argv
            return f"{self.group}: {kind} {call}({value}){' (accepted)' if good == 'good' else ''}"
        command = "python" if self.expect == "script" else "retrokit"
        words = " ".join(a if a else repr(a) for a in self.argv)
        made = [getattr(step, "what", "") for step in self.setup]
        made = [what for what in made if what]
        return f"{self.group}: {command} {words}" + (f" [{'; '.join(made)}]" if made else "")


def _short(label: str) -> str:
    """A test id: long runs of one character (a name too long) as ``a*300``."""
    return re.sub(r"(.)\1{19,}", lambda m: f"{m.group(1)}*{len(m.group(0))}", label)


def params(cases: list[Case]) -> list:
    """``pytest.param`` per case: its label as id, ``sweep_full`` unless CI runs it."""
    seen: dict[str, int] = {}
    out = []
    for case in cases:
        name = _short(case.label)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name} #{seen[name]}"
        marks = [] if case.ci else [pytest.mark.sweep_full]
        out.append(pytest.param(case, id=name, marks=marks))
    return out


def ci_first(cases: list[Case]) -> list[Case]:
    """CI's share of a group of cases: the first case of each ``group`` (the rest: ``-m sweep``)."""
    seen: set[str] = set()
    for case in cases:
        if case.group not in seen:
            seen.add(case.group)
            case.ci = True
    return cases


def without(cases: list[Case], covered: dict[str, str]) -> list[Case]:
    """``cases`` less those a test of tests/cli/ already checks: ``covered`` maps a case's label, less its
    group, to that test's name. Every entry must name a case (a stale one fails collection)."""
    commands = {case.label[len(case.group) + 2 :] for case in cases}
    stale = sorted(set(covered) - commands)
    assert not stale, f"covered names no case: {stale}"
    return [case for case in cases if case.label[len(case.group) + 2 :] not in covered]


def run_live(case: Case, d: Path, preexec: Callable[[], None] | None) -> tuple[int, str, str, list[int]]:
    """Run a case's command in its own session. With ``send_signal``, send it to the whole process group
    once ``signal_when`` is met; ``closed`` streams are closed when it starts. Returns the exit code, the
    output and the steps of the run's checkpoints when the signal was sent."""
    closed = [STREAMS[name] for name in case.closed]

    def before_exec() -> None:
        if preexec is not None:
            preexec()
        for fd in closed:
            os.close(fd)

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [RETROKIT, *case.argv], cwd=d, stdout=out, stderr=err, env=CHILD_ENV, start_new_session=True,
            preexec_fn=before_exec,
        )  # fmt: skip
        before: list[int] = []
        try:
            if case.send_signal:
                deadline = time.monotonic() + LIVE_TIMEOUT_S
                if case.signal_when == "checkpoint":
                    while not checkpoint_steps(d / "run") and proc.poll() is None:
                        if time.monotonic() > deadline:
                            raise subprocess.TimeoutExpired(case.argv, LIVE_TIMEOUT_S)
                        time.sleep(0.1)
                else:
                    time.sleep(float(case.signal_when))
                before = checkpoint_steps(d / "run")
                if proc.poll() is None:
                    os.killpg(proc.pid, getattr(signal, case.send_signal))
            code = proc.wait(timeout=LIVE_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace"), before


def live_problems(case: Case, code: int, lines: list[str], output: str, before: list[int], d: Path) -> list:
    problems = []
    if case.expect == "interrupted" and code == 0:
        # the signal came once training had begun (a fast machine): a stop, saved and said as SIGTERM's is
        problems += stopped_and_saved()(d, output, before)
    elif case.expect == "interrupted":  # before training: one line, exit 130, no run dir left
        if code != 130:
            problems.append(f"exit {code}, not 130 (or 0 with a stop checkpoint)")
        if len(lines) != 1 or not lines[0].startswith("retrokit: interrupted"):
            problems.append(f"{len(lines)} stderr lines, not one 'retrokit: interrupted'")
        if (d / "run").exists():
            problems.append("the run dir was left")
    if case.exit_code is not None and code != case.exit_code:
        problems.append(f"exit {code}, not {case.exit_code}")
    if case.check is not None:
        problems += case.check(d, output, before)
    return problems


API_TARGETS = {"vector": 4, "single": 2}  # _api_child.py's: four vector backends, a retro env and its twin


def api_problems(case: Case, code: int, stdout: str) -> list[str]:
    """Every target answered, agreed on the error as ``case.agree`` asks, and played on as its twin."""
    problems = [] if code == 0 else [f"exit {code}, not 0"]
    rows = [line.split("\t") for line in stdout.splitlines() if line.strip()]
    targets = API_TARGETS[case.argv[0]]
    if len(rows) != targets or any(len(row) != 4 for row in rows):
        return [*problems, f"{len(rows)} result lines, not {targets}"]
    for game in {row[0] for row in rows}:
        errors = [row[2] for row in rows if row[0] == game]
        shared = {"message": errors, "type": [e.split(":")[0] for e in errors], "none": []}[case.agree]
        if len(set(shared)) > 1:
            problems.append(f"{game}: targets differ: {' | '.join(sorted(set(errors)))}")
    for game, target, error, after in rows:
        if after != "same":
            problems.append(f"{target} ({game}): the next calls differ from a fresh env's")
        if "\\n" in error:
            problems.append(f"{target}: the error has more than one line")
        problems += [
            f"{target}: {error[:90]!r} lacks {needle!r}" for needle in case.needles if needle not in error
        ]
    return problems


def _make_writable(root: Path) -> None:
    for dirpath, dirs, _ in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(dirpath, name), 0o755)


def _filled(argv: list[str]) -> list[str]:
    """``argv`` with ``{missing_rom}`` and ``{address:KIND}`` from the session fixtures."""
    return [re.sub(r"\{(missing_rom|address:\w+)\}", lambda m: FIXTURE[m.group(1)], arg) for arg in argv]


def check(case: Case, d: Path) -> None:
    """Run ``case`` in the empty folder ``d`` and fail with every problem found (a skip where this machine
    cannot produce the case's fault)."""
    case = dataclasses.replace(case, argv=_filled(case.argv), needles=tuple(_filled(list(case.needles))))
    with contextlib.ExitStack() as mounts:
        CASE_MOUNTS.append(mounts)
        try:
            problems, stderr = _run_case(case, d)
        finally:
            CASE_MOUNTS.pop()
    _make_writable(d)
    if problems:
        tail = "\n".join(f"    stderr: {line[:300]}" for line in stderr.strip().splitlines()[-5:])
        pytest.fail(f"{case.label}\n  problems: {'; '.join(problems)}\n{tail}", pytrace=False)


def _run_case(case: Case, d: Path) -> tuple[list[str], str]:
    for setup in case.setup:
        setup(d)
    before = snapshot(d)
    preexec = file_modes_bind if case.read_only_binds and os.geteuid() == 0 else None
    if case.preexec is not None:
        preexec = chained(preexec, case.preexec)
    problems: list[str] = []
    checkpoints: list[int] = []
    live = case.send_signal is not None or bool(case.closed)
    limit = API_TIMEOUT_S if case.expect in ("api", "script") else LIVE_TIMEOUT_S if live else TIMEOUT_S
    try:
        if live:
            code, stdout, stderr, checkpoints = run_live(case, d, preexec)
        elif case.close_stdout:
            proc = subprocess.Popen(
                [RETROKIT, *case.argv], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=CHILD_ENV, preexec_fn=preexec,
            )  # fmt: skip
            proc.stdout.readline()
            proc.stdout.close()  # the reader goes away, as `retrokit train ... | head -1` does
            stderr = proc.stderr.read().decode(errors="replace")
            code = proc.wait(timeout=limit)
            stdout = ""
        else:
            argv = (
                [sys.executable, API_CHILD, *case.argv]
                if case.expect == "api"
                else [sys.executable, *case.argv]
                if case.expect == "script"
                else [RETROKIT, *case.argv]
            )
            with open(case.stdout_to or os.devnull, "wb") as sink:
                res = subprocess.run(
                    argv, cwd=d, stdout=sink if case.stdout_to else subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, errors="replace", env=child_env(case.env), timeout=limit, preexec_fn=preexec,
                )  # fmt: skip
            code, stdout, stderr = res.returncode, res.stdout or "", res.stderr
    except subprocess.TimeoutExpired:
        return [f"timed out after {limit} s"], ""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if "Traceback" in stderr or "Traceback" in stdout:
        problems.append("traceback")
    if case.expect == "error":
        if code != 2:
            problems.append(f"exit {code}, not 2")
        if len(lines) != 1:
            problems.append(f"{len(lines)} stderr lines, not 1")
        if not lines or not lines[0].startswith("retrokit: error: "):
            problems.append("no 'retrokit: error:' line")
    elif case.expect == "api":
        problems += api_problems(case, code, stdout)
    elif case.expect == "warning":
        if code != 0:
            problems.append(f"exit {code}, not 0")
        if len(lines) != 1 or not lines[0].startswith("retrokit: warning: "):
            problems.append(f"{len(lines)} stderr lines, not one 'retrokit: warning:'")
    for needle in case.needles if case.expect != "api" else ():
        if lines and needle not in lines[-1]:
            problems.append(f"line lacks {needle!r}")
    problems += live_problems(case, code, lines, stdout + stderr, checkpoints, d)
    if case.writes_nothing:
        differ = changed(before, snapshot(d))
        if differ:
            problems.append(f"changed: {', '.join(differ[:4])}{' ...' if len(differ) > 4 else ''}")
    return problems, stderr
