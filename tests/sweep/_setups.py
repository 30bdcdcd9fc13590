"""What a sweep case's folder holds before its command (what is checked after it: _checks.py). Setups copy
the session fixtures' runs (:data:`FIXTURE`, filled by conftest.py when a case runs, never at collection);
each carries ``what``, the words the case's label shows for it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from tests.cli._run import fill, mounted

Setup = Callable[[Path], None]


Check = Callable[[Path, str, list[int]], list[str]]  # (case folder, output, steps) -> problems


# filled by the session fixtures of conftest.py: "run" (the tiny trained run), "missing_rom", "rllib_run",
# "address:<kind>"; read when a case runs, never when the cases are made (collection needs no trained run)
FIXTURE: dict[str, str] = {}


def named(what: str, setup: Setup) -> Setup:
    """``setup`` with a description for the case's label (``[...]`` after the command)."""
    setup.what = what  # type: ignore[attr-defined]
    return setup


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


DL = "damaged-logs"  # the run copies of the damaged-log cases (``-k damaged-logs``)


DAMAGED_LOGS = [
    named(f"{DL}: a run copy with damaged logs", run_copy(DL)),
    named("", append_bytes(f"{DL}/monitor/0.monitor.csv", b"-2\xff.0,800,0.5\n\0\0\0\0\n-20.0,8")),
    named("", append_bytes(f"{DL}/progress.csv", b"\xff\xfe,\0\0\n\0\0\0\n12")),
]


def cut_copy(name: str, of: str = "checkpoints/model_64_steps.zip", keep: float = 0.5) -> Setup:
    """``run/<name>``: the first ``keep`` of the fixture's ``of``, as a write cut short leaves it."""

    def setup(d: Path) -> None:
        data = (Path(FIXTURE["run"]) / of).read_bytes()
        (d / "run" / name).write_bytes(data[: int(len(data) * keep)])

    return named(f"run/{name}: {keep:.0%} of {of}", setup)


CASE_MOUNTS: list[contextlib.ExitStack] = []  # the running case's mounts (one case at a time per process)


def _mount(d: Path, *argv: str) -> None:
    """``mount ARGV`` until the case ends (its last argument is the mount point); a skip without root."""
    CASE_MOUNTS[-1].enter_context(mounted(*argv))


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


MARKER = "PICKLE-RAN"


def chained(*steps: Callable[[], None] | None) -> Callable[[], None]:
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


def rllib_run_copy(name: str = "run") -> Setup:
    """A copy of the finished 64-step APPO run (real Ray; the session fixture ``sweep_rllib_run``)."""

    def setup(d: Path) -> None:
        shutil.copytree(FIXTURE["rllib_run"], d / name, symlinks=True)

    return named("an RLlib run", setup)


def tampered_rllib_state(d: Path) -> None:
    """A byte added to each RLlib state file of the run copy's checkpoints (another pickle, as untrusted
    would be)."""
    for path in (d / "run" / "checkpoints").glob("*/algorithm_state.pkl"):
        with open(path, "ab") as fh:
            fh.write(b"\0")


def script(name: str, body: str) -> Setup:
    """``<name>``: a Python script of the case (a file: workers of a second retro env re-import it)."""
    return named("", text(name, body))
