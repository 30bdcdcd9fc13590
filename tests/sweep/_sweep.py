"""The sweep's machinery: a case is one ``retrokit`` command (or Python script) a user may run, the files it
finds in its folder, and what the user must see; :func:`check` runs it as a real process in a fresh folder.

A case expects one of:

- ``error``: exit code 2, exactly one line on stderr, starting ``retrokit: error:``;
- ``warning``: exit code 0, exactly one line on stderr, starting ``retrokit: warning:``;
- ``clean``: no traceback (for cases with no single right exit code, e.g. a closed stdout);
- ``interrupted``: exit code 130, exactly one line on stderr, starting ``retrokit: interrupted``;
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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli._run import (
    CHILD_ENV,
    RETROKIT,
    changed,
    child_env,
    file_modes_bind,
    fill,
    mounted,
    snapshot,
)

TIMEOUT_S = 120
API_TIMEOUT_S = 600  # an API case builds 8 vector envs (8 worker processes among them): minutes on busy cores
LIVE_TIMEOUT_S = 600  # start, train to a checkpoint, stop: Ray or a retro game take minutes on busy cores
_CHECKPOINT = re.compile(r"^model_(\d+)_steps(\.zip)?$")
STREAMS = {"stdout": 1, "stderr": 2}
API_CHILD = str(Path(__file__).with_name("_api_child.py"))

Setup = Callable[[Path], None]
Check = Callable[[Path, str, list[int]], list[str]]  # (case folder, output, steps) -> problems

# filled by the session fixtures of conftest.py: "run" (the tiny trained run), "missing_rom", "rllib_run",
# "address:<kind>"; read when a case runs, never when the cases are made (collection needs no trained run)
FIXTURE: dict[str, str] = {}


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


def named(what: str, setup: Setup) -> Setup:
    """``setup`` with a description for the case's label (``[...]`` after the command)."""
    setup.what = what  # type: ignore[attr-defined]
    return setup


# ------------------------------------------------------------------------------------------------------
# setups: what the case's folder holds before the command
# ------------------------------------------------------------------------------------------------------


def run_copy(name: str = "run") -> Setup:
    def setup(d: Path) -> None:
        shutil.copytree(FIXTURE["run"], d / name, symlinks=True)

    return named("" if name == "run" else f"a run copied as {name}", setup)


def text(name: str, content: str | bytes = "not a model\n") -> Setup:
    def setup(d: Path) -> None:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    return named(f"file {name}", setup)


def folder(name: str, mode: int | None = None) -> Setup:
    def setup(d: Path) -> None:
        (d / name).mkdir(parents=True, exist_ok=True)
        if mode is not None:
            (d / name).chmod(mode)

    return named(f"folder {name}" + (f" mode {mode:o}" if mode is not None else ""), setup)


def edit_config(transform: Callable[[str], str], run: str = "run") -> Setup:
    def setup(d: Path) -> None:
        path = d / run / "config.yaml"
        path.write_text(transform(path.read_text()))

    return named(f"{run}/config.yaml edited", setup)


def set_field(field: str, value: str) -> Setup:
    """config.yaml with the top-level ``field: value`` (replaced, or added)."""

    def transform(text: str) -> str:
        lines = text.splitlines()
        out = [f"{field}: {value}" if line.startswith(f"{field}:") else line for line in lines]
        if out == lines:
            out.append(f"{field}: {value}")
        return "\n".join(out) + "\n"

    return named(f"config {field}: {value}", edit_config(transform))


def drop_field(field: str) -> Setup:
    """config.yaml without the top-level ``field`` (and its indented block)."""

    def transform(text: str) -> str:
        out, skipping = [], False
        for line in text.splitlines():
            if line.startswith(f"{field}:"):
                skipping = True
                continue
            if skipping and (line.startswith(" ") or line.startswith("- ")):
                continue
            skipping = False
            out.append(line)
        return "\n".join(out) + "\n"

    return named(f"config without {field}", edit_config(transform))


def damage(pattern: str, how: str, run: str = "run") -> Setup:
    """Damage the files of the run matching ``pattern``: ``text``, ``truncate``, ``foreign`` or ``remove``."""

    def setup(d: Path) -> None:
        for path in sorted((d / run).glob(pattern)):
            if how == "remove":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            elif how == "text":
                path.write_text("not a model\n")
            elif how == "truncate":
                data = path.read_bytes()
                path.write_bytes(data[: len(data) // 2])
            elif how == "foreign":
                _foreign_zip(path)

    return named(f"{run}/{pattern}: {how}", setup)


def _foreign_zip(path: Path) -> None:
    """A valid zip that is not an SB3 model (a folder of notes)."""
    path.unlink(missing_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "holiday photos\n")
        zf.writestr("data", "{not json")


def foreign_zip(name: str) -> Setup:
    def setup(d: Path) -> None:
        _foreign_zip(d / name)

    return named(f"{name}: a foreign zip", setup)


def truncated_model(name: str) -> Setup:
    def setup(d: Path) -> None:
        data = (Path(FIXTURE["run"]) / "model.zip").read_bytes()
        (d / name).write_bytes(data[: len(data) // 2])

    return named(f"{name}: a model cut short", setup)


def monitor_csv(body: str, run: str = "run") -> Setup:
    """A plot-only run dir: config-less folder with one monitor CSV."""

    def setup(d: Path) -> None:
        (d / run / "monitor").mkdir(parents=True, exist_ok=True)
        (d / run / "monitor" / "0.monitor.csv").write_text(body)

    return named(f"{run}/monitor/0.monitor.csv: {body[:24]!r}", setup)


def append_bytes(name: str, data: bytes, mode: str = "ab") -> Setup:
    """Damage ``name`` (a log of a run copy) as a crash or a bad disk does: ``data`` appended (``wb``: the
    whole file replaced)."""

    def setup(d: Path) -> None:
        with open(d / name, mode) as fh:
            fh.write(data)

    return named(f"{name}: {data[:8]!r} ({mode})", setup)


DL = "damaged-logs"  # the run copies of the damaged-log cases (``--only damaged-logs``; issue 32)
DAMAGED_LOGS = [
    named(f"{DL}: a run copy with damaged logs", run_copy(DL)),
    named("", append_bytes(f"{DL}/monitor/0.monitor.csv", b"-2\xff.0,800,0.5\n\0\0\0\0\n-20.0,8")),
    named("", append_bytes(f"{DL}/progress.csv", b"\xff\xfe,\0\0\n\0\0\0\n12")),
]


def _checkpoint_steps(run: Path) -> list[int]:
    try:
        names = os.listdir(run / "checkpoints")
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(_CHECKPOINT.match, names) if m)


def _leftovers(run: Path) -> list[str]:
    """Temporaries of atomic writes and the lock: none may outlive a command."""
    return sorted(p.name for p in run.rglob(".*") if ".tmp-" in p.name or p.name == ".train.pid")


def stopped_and_saved(run: str = "run", says_so: bool = True) -> Check:
    """A stop checkpoint past every checkpoint there was when the signal was sent, and (``says_so``: stdout
    can be read) the line saying so."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        steps = _checkpoint_steps(d / run)
        if not steps or (before and steps[-1] <= before[-1]):
            return [f"no stop checkpoint past {before[-1] if before else 'none'} (have {steps[-3:]})"]
        said = not says_so or f"interrupted at {steps[-1]} steps" in output
        problems = [] if said else ["no 'interrupted at' line"]
        return problems + [f"left {name}" for name in _leftovers(d / run)]

    return check


def trained_to(steps: int, *needles: str, run: str = "run") -> Check:
    """The run's newest checkpoint is at ``steps`` (it finished), the output has ``needles``."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        have = _checkpoint_steps(d / run)
        problems = [] if have and have[-1] == steps else [f"newest checkpoint {have[-1:]} not {steps}"]
        problems += [f"output lacks {needle!r}" for needle in needles if needle not in output]
        return problems + [f"left {name}" for name in _leftovers(d / run)]

    return check


def cut_copy(name: str, of: str = "checkpoints/model_64_steps.zip", keep: float = 0.5) -> Setup:
    """``run/<name>``: the first ``keep`` of the fixture's ``of``, as a write cut short leaves it."""

    def setup(d: Path) -> None:
        data = (Path(FIXTURE["run"]) / of).read_bytes()
        (d / "run" / name).write_bytes(data[: int(len(data) * keep)])

    return named(f"run/{name}: {keep:.0%} of {of}", setup)


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
                    while not _checkpoint_steps(d / "run") and proc.poll() is None:
                        if time.monotonic() > deadline:
                            raise subprocess.TimeoutExpired(case.argv, LIVE_TIMEOUT_S)
                        time.sleep(0.1)
                else:
                    time.sleep(float(case.signal_when))
                before = _checkpoint_steps(d / "run")
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
    if case.expect == "interrupted":
        if code != 130:
            problems.append(f"exit {code}, not 130")
        if len(lines) != 1 or not lines[0].startswith("retrokit: interrupted"):
            problems.append(f"{len(lines)} stderr lines, not one 'retrokit: interrupted'")
    if case.exit_code is not None and code != case.exit_code:
        problems.append(f"exit {code}, not {case.exit_code}")
    if case.check is not None:
        problems += case.check(d, output, before)
    return problems


_MOUNTS: list[contextlib.ExitStack] = []  # the running case's mounts (one case at a time per process)


def _mount(d: Path, *argv: str) -> None:
    """``mount ARGV`` until the case ends (its last argument is the mount point); a skip without root."""
    _MOUNTS[-1].enter_context(mounted(*argv))


def tmpfs(name: str, size: str, run: bool = False, spare_mb: int = 0, full: bool = False) -> Setup:
    """A tmpfs at ``name`` of ``size`` (or, with ``run``, the fixture run's size plus ``spare_mb``), holding a
    copy of the fixture run (``run``) and then filled to the last byte (``full``)."""

    def setup(d: Path) -> None:
        point = d / name
        point.mkdir(parents=True, exist_ok=True)
        total = size
        if run:
            used = sum(4096 + f.stat().st_size for f in Path(FIXTURE["run"]).rglob("*") if f.is_file())
            total = f"{used // 1024 + 64 + spare_mb * 1024}k"
        _mount(d, "-t", "tmpfs", "-o", f"size={total}", "tmpfs", str(point))
        if run:
            shutil.copytree(FIXTURE["run"], point / "run", symlinks=True)
        if full:
            fill(point)

    return named(f"tmpfs {name}" + (" full" if full else ""), setup)


def read_only_mount(name: str) -> Setup:
    """``name`` (a folder of the case) bound onto itself read-only: EROFS for root too."""

    def setup(d: Path) -> None:
        point = str(d / name)
        _mount(d, "--bind", point, point)
        _mount(d, "-o", "remount,bind,ro", point)

    return named(f"{name} mounted read-only", setup)


def read_only(name: str) -> Setup:
    """Every file and folder of ``name`` without write permission (with ``read_only_binds``: root too)."""

    def setup(d: Path) -> None:
        for path in [d / name, *(d / name).rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)

    return named(f"{name} read-only", setup)


def replace_with(name: str, kind: str, target: str = "/nonexistent/retrokit-sweep") -> Setup:
    """``name`` (removed if there) replaced by a ``folder``, a ``file`` or a ``link`` to ``target``."""

    def setup(d: Path) -> None:
        path = d / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if kind == "folder":
            path.mkdir()
        elif kind == "file":
            path.write_text("not what is expected\n")
        else:
            path.symlink_to(target)

    return named(f"{name} a {kind}", setup)


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
        return [f"left {name}" for name in _leftovers(d / run)] if (d / run).is_dir() else []

    return check


def made(name: str) -> Check:
    def check(d: Path, output: str, before: list[int]) -> list[str]:
        return [] if (d / name).is_file() and (d / name).stat().st_size > 0 else [f"{name} not written"]

    return check


def all_of(*checks: Check) -> Check:
    def check(d: Path, output: str, before: list[int]) -> list[str]:
        return [problem for c in checks for problem in c(d, output, before)]

    return check


TINY_TRAIN = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": ""}  # Python's UTF-8 mode follows (PEP 540)
PURE_ASCII = {**ASCII, "PYTHONUTF8": "0"}  # no UTF-8 mode: the file system encoding is ASCII


MARKER = "PICKLE-RAN"


def _chained(*steps: Callable[[], None] | None) -> Callable[[], None]:
    def run() -> None:
        for step in steps:
            if step is not None:
                step()

    return run


def rlimit(which: str, soft: int) -> Callable[[], None]:
    """In the child: ``RLIMIT_<which>`` lowered to ``soft`` (``ulimit -v`` / ``-u``), a real limit."""
    import resource

    def lower() -> None:
        number = getattr(resource, f"RLIMIT_{which}")
        resource.setrlimit(number, (soft, resource.getrlimit(number)[1]))

    return lower


def deleted_cwd() -> None:
    """In the child: work in a folder that is then deleted (``mkdir d; cd d; rmdir ../d``)."""
    folder = tempfile.mkdtemp(prefix="retrokit-sweep-gone-")
    os.chdir(folder)
    os.rmdir(folder)


def planted_pickles(pattern: str, run: str = "run") -> Setup:
    """Every pickled value in the ``data`` of the zips ``pattern`` of the run replaced by one that creates
    ``MARKER`` in the case's folder when unpickled (SB3's own ``load`` does)."""
    import base64
    import json
    import pickle

    def setup(d: Path) -> None:
        payload = base64.b64encode(pickle.dumps(_Opener(str(d / MARKER)))).decode()
        for path in (d / run).glob(pattern):
            _rewrite_zip(path, "data", lambda raw: _plant(json.loads(raw), payload))

    def _plant(data: dict, payload: str) -> bytes:
        import json

        for value in data.values():
            if isinstance(value, dict) and ":serialized:" in value:
                value[":serialized:"] = payload
        return json.dumps(data).encode()

    return named(f"pickles in {run}/{pattern}", setup)


class _Opener:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _rewrite_zip(path: Path, member: str, change: Callable[[bytes], bytes] | None, zeros_mb: int = 0) -> None:
    """Rewrite ``member`` of the zip ``path`` with ``change(old bytes)``, or as ``zeros_mb`` MB of zeros
    deflated at level 9 (streamed: a 1 GB bomb never sits in memory or on disk)."""
    with zipfile.ZipFile(path) as zin:
        members = [(info, zin.read(info)) for info in zin.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info, raw in members:
            if info.filename != member:
                zout.writestr(info, raw)
            elif change is not None:
                zout.writestr(info, change(raw))
        if change is None:
            info = zipfile.ZipInfo(member)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zout.open(info, "w", force_zip64=True) as fh:
                for _ in range(zeros_mb):
                    fh.write(bytes(1 << 20))


def bomb(pattern: str, member: str, mb: int, run: str = "run") -> Setup:
    def setup(d: Path) -> None:
        for path in (d / run).glob(pattern):
            _rewrite_zip(path, member, None, zeros_mb=mb)

    return named(f"{run}/{pattern} {member}: {mb} MB of zeros", setup)


def torch_global(pattern: str, run: str = "run") -> Setup:
    """``policy.pth`` replaced by a torch file whose pickle names a global (what weights_only refuses)."""

    def setup(d: Path) -> None:
        import io

        import torch

        buffer = io.BytesIO()
        torch.save({"w": _Opener(str(d / MARKER))}, buffer)
        for path in (d / run).glob(pattern):
            _rewrite_zip(path, "policy.pth", lambda _raw: buffer.getvalue())

    return named(f"{run}/{pattern}: a torch global", setup)


def link(name: str, target: str, run: str = "run") -> Setup:
    """``run/name`` replaced by a link to ``target`` (in the case's folder: outside the run dir)."""

    def setup(d: Path) -> None:
        path = d / run / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        (d / "secrets").mkdir(exist_ok=True)
        (d / "secrets" / "0.monitor.csv").write_text("private\n")
        (d / "secret.txt").write_text("private\n")
        path.symlink_to(d / target)

    return named(f"{run}/{name} -> {target}", setup)


def no_marker(d: Path, output: str, before: list[int]) -> list[str]:
    return [f"{MARKER} exists: a pickle from the run dir ran"] if (d / MARKER).exists() else []


def rllib_run_copy(name: str = "run") -> Setup:
    """A copy of the finished 64-step APPO run (real Ray; the session fixture ``sweep_rllib_run``)."""

    def setup(d: Path) -> None:
        shutil.copytree(FIXTURE["rllib_run"], d / name, symlinks=True)

    return named("an RLlib run", setup)


def tampered_rllib_state(d: Path) -> None:
    """A byte added to each RLlib state file of the run copy's checkpoints (another pickle, as a stranger's
    would be)."""
    for path in (d / "run" / "checkpoints").glob("*/algorithm_state.pkl"):
        with open(path, "ab") as fh:
            fh.write(b"\0")


def _quiet(d: Path, output: str, before: list[int]) -> list[str]:
    return ["matplotlib's cache warning"] if "Matplotlib" in output or "mkdir -p failed" in output else []


def script(name: str, body: str) -> Setup:
    """``<name>``: a Python script of the case (a file: workers of a second retro env re-import it)."""
    return named("", text(name, body))


def says(*needles: str, once: str | None = None) -> Check:
    """The output has every needle, and ``once`` exactly once."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        problems = [f"output lacks {needle!r}" for needle in needles if needle not in output]
        if once is not None and output.count(once) != 1:
            problems.append(f"{once!r} {output.count(once)} times, not once")
        return problems

    return check


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
        _MOUNTS.append(mounts)
        try:
            problems, stderr = _run_case(case, d)
        finally:
            _MOUNTS.pop()
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
        preexec = _chained(preexec, case.preexec)
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
