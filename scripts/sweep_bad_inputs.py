"""Sweep of user mistakes and damaged inputs against the installed ``retrokit`` command (run by hand).

    python scripts/sweep_bad_inputs.py [--jobs 2] [--only SUBSTRING] [--keep]

Each case runs the real console script (``retrokit`` beside this Python) in a subprocess, in a fresh
temporary folder that holds only what the case set up (a copy of a tiny trained run, a damaged config, a
text file named ``model.zip``, ...), and checks what a user must see:

- ``error``: exit code 2, exactly one line on stderr, starting ``retrokit: error:``;
- ``warning``: exit code 0, exactly one line on stderr, starting ``retrokit: warning:``;
- ``clean``: no traceback (for cases with no single right exit code, e.g. a closed stdout);
- ``interrupted``: exit code 130, exactly one line on stderr, starting ``retrokit: interrupted``;
- never ``Traceback`` on stdout or stderr;
- for cases that must write nothing (most of them): every file and folder of the case's folder is as it
  was (contents and modification times), the run copies included.

The ``api:`` cases (``--only api:``; they need no trained run) check the Python API instead: a bad call on
every vector backend and on the stable-retro single env (a float action, a negative seed, a missing
attribute, ...) must give every target the same one-line error, and the env must then play on exactly as a
fresh twin given the same good calls (see ``api_cases``; docs/vectorization.md, "Bad calls").

The ``os:`` cases (``--only os:``) are the operating system's refusals: a name too long, /proc, a read-only
run dir or disk, a full disk, a folder where a file is expected, a link to nothing, an ASCII locale (see
``os_cases``; docs/cli.md, "When the operating system says no"). Their tmpfs and read-only mounts need root;
without it those cases are reported as skipped.

The ``machine:`` and ``fault:`` cases (``--only machine:``, ``--only fault:``; issue 48) are the machines
and faults users have: no display (gymnasium's and SB3's ``check_env``, ``render_mode="human"``), another
Ray cluster on the machine, rl-zoo3 without ``--conf-file``, ``RecordVideo`` around a kit env,
``vectorization_mode`` values, a vector env used from two threads or copied, and an env worker killed with
SIGKILL during ``retrokit train`` (then resumed). Each is a real Python script or command
(``expect="script"``: its exit code and output are checked, never a traceback; ``env`` values of None
remove that variable).

A table of the failures and a summary are printed; the exit code is 1 if any case failed. It is not a
pytest module (pytest collects ``tests/`` only): it takes a few minutes and trains one tiny run first.
The regression tests for what it found live in ``tests/cli/``.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RETROKIT = os.path.join(os.path.dirname(sys.executable), "retrokit")
ENV = "RetroKit/Pong-v0"
TIMEOUT_S = 120
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

Setup = Callable[[Path], None]
Check = Callable[[Path, str, list[int]], list[str]]  # (case folder, output, steps) -> problems


@dataclasses.dataclass
class Case:
    group: str
    argv: list[str]
    setup: list[Setup] = dataclasses.field(default_factory=list)
    expect: str = "error"  # error | warning | clean
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
    # expect="api": ``argv`` is (kind, call, value, good|bad) for :func:`api_child`; ``agree`` says what every
    # target of one game must share: "message" (the same error line), "type" (its exception type), "none"
    agree: str = "message"
    # the operating system's refusals (os_cases): ``env`` is added to the command's environment (a locale),
    # ``stdout_to`` names the file its stdout is written to (``/dev/full``)
    env: dict[str, str] | None = None
    stdout_to: str | None = None
    # run in the child just before the command (a real limit: ``rlimit(...)``; a deleted working folder)
    preexec: Callable[[], None] | None = None

    @property
    def label(self) -> str:
        if self.expect == "api":
            kind, call, value, good = self.argv
            return f"{self.group}: {kind} {call}({value}){' (accepted)' if good == 'good' else ''}"
        command = "python" if self.expect == "script" else "retrokit"
        return f"{self.group}: {command} {' '.join(a if a else repr(a) for a in self.argv)}"


# ------------------------------------------------------------------------------------------------------
# fixtures: built once per sweep, copied into each case's folder
# ------------------------------------------------------------------------------------------------------

FIXTURE: dict[str, str] = {}


def build_fixture(base: Path) -> None:
    """A finished 64-step PPO run on Pong with checkpoints at 32 and 64 steps."""
    argv = [
        RETROKIT, "train", "ppo", ENV, "--run-dir", "run", "--timesteps", "64", "--n-envs", "1",
        "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "32",
    ]  # fmt: skip
    res = subprocess.run(argv, cwd=base, capture_output=True, text=True, env=CHILD_ENV, timeout=600)
    if res.returncode != 0:
        sys.exit(f"could not train the fixture run:\n{res.stderr[-3000:]}")
    FIXTURE["run"] = str(base / "run")
    FIXTURE["missing_rom"] = _missing_rom_id(base)


def _missing_rom_id(base: Path) -> str:
    """A stable-retro ID whose ROM is absent here (from ``retrokit list --system nes``)."""
    res = subprocess.run(
        [RETROKIT, "list", "--system", "nes"], cwd=base, capture_output=True, text=True, env=CHILD_ENV
    )
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "missing":
            return parts[0]
    sys.exit("no NES game with a missing ROM: the missing-ROM cases need one")


def run_copy(name: str = "run") -> Setup:
    def setup(d: Path) -> None:
        shutil.copytree(FIXTURE["run"], d / name, symlinks=True)

    return setup


def text(name: str, content: str | bytes = "not a model\n") -> Setup:
    def setup(d: Path) -> None:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    return setup


def folder(name: str, mode: int | None = None) -> Setup:
    def setup(d: Path) -> None:
        (d / name).mkdir(parents=True, exist_ok=True)
        if mode is not None:
            (d / name).chmod(mode)

    return setup


def edit_config(transform: Callable[[str], str], run: str = "run") -> Setup:
    def setup(d: Path) -> None:
        path = d / run / "config.yaml"
        path.write_text(transform(path.read_text()))

    return setup


def set_field(field: str, value: str) -> Setup:
    """config.yaml with the top-level ``field: value`` (replaced, or added)."""

    def transform(text: str) -> str:
        lines = text.splitlines()
        out = [f"{field}: {value}" if line.startswith(f"{field}:") else line for line in lines]
        if out == lines:
            out.append(f"{field}: {value}")
        return "\n".join(out) + "\n"

    return edit_config(transform)


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

    return edit_config(transform)


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

    return setup


def _foreign_zip(path: Path) -> None:
    """A valid zip that is not an SB3 model (a folder of notes)."""
    path.unlink(missing_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "holiday photos\n")
        zf.writestr("data", "{not json")


def foreign_zip(name: str) -> Setup:
    def setup(d: Path) -> None:
        _foreign_zip(d / name)

    return setup


def truncated_model(name: str) -> Setup:
    def setup(d: Path) -> None:
        data = (Path(FIXTURE["run"]) / "model.zip").read_bytes()
        (d / name).write_bytes(data[: len(data) // 2])

    return setup


def monitor_csv(body: str, run: str = "run") -> Setup:
    """A plot-only run dir: config-less folder with one monitor CSV."""

    def setup(d: Path) -> None:
        (d / run / "monitor").mkdir(parents=True, exist_ok=True)
        (d / run / "monitor" / "0.monitor.csv").write_text(body)

    return setup


def append_bytes(name: str, data: bytes, mode: str = "ab") -> Setup:
    """Damage ``name`` (a log of a run copy) as a crash or a bad disk does: ``data`` appended (``wb``: the
    whole file replaced)."""

    def setup(d: Path) -> None:
        with open(d / name, mode) as fh:
            fh.write(data)

    return setup


DL = "damaged-logs"  # the run copies of the damaged-log cases (``--only damaged-logs``; issue 32)
DAMAGED_LOGS = [
    run_copy(DL),
    append_bytes(f"{DL}/monitor/0.monitor.csv", b"-2\xff.0,800,0.5\n\0\0\0\0\n-20.0,8"),
    append_bytes(f"{DL}/progress.csv", b"\xff\xfe,\0\0\n\0\0\0\n12"),
]


# ------------------------------------------------------------------------------------------------------
# the cases
# ------------------------------------------------------------------------------------------------------

GOOD_CSV = '#{"t_start": 0, "env_id": "RetroKit/Pong-v0"}\nr,l,t\n-21.0,812,3.5\n-20.0,900,7.25\n'


def train_cases() -> list[Case]:
    cases: list[Case] = []
    quick = ["--run-dir", "run", "--timesteps", "64"]

    def train(group: str, *argv: str, needles: tuple[str, ...] = (), **kw) -> None:
        cases.append(Case(group, ["train", *argv], needles=needles, **kw))

    train("train: usage")
    train("train: usage", "ppo")
    train("train: usage", "ppo", ENV, "--bogus-flag")
    train("train: usage", "ppo", ENV, "extra-positional")

    rom = FIXTURE["missing_rom"]
    for engine in ("sb3", "rllib"):
        eng = ["--engine", engine]
        g = f"train {engine}: names"
        train(g, "bogus", ENV, *eng, *quick, needles=("bogus",))
        train(g, "ppo", "RetroKit/Bogus-v0", *eng, *quick, needles=("RetroKit/Bogus-v0",))
        for other in ("Pong-v0", "ALE/Pong-v5", "PongNoFrameskip-v4"):
            train(g, "ppo", other, *eng, *quick, needles=("use RetroKit/Pong-v0",))
        train(g, "ppo", "CartPole-v1", *eng, *quick)
        train(g, "ppo", "Airstriker-Genesis-v0", *eng, *quick, needles=("RetroKit/Airstriker-Genesis-v0",))
        train(g, "ppo", rom, *eng, *quick, needles=("import-roms",))
        train(g, "ppo", ENV, *eng, "--network", "bogus", *quick, needles=("bogus",))
        train(g, "ppo", ENV, *eng, "--preset", "bogus", *quick, needles=("bogus",))
        train(g, "ppo", ENV, *eng, "--backend", "bogus", *quick, needles=("unknown backend",))
        train(g, "ppo", ENV, *eng, "--env-kwarg", "backend=bogus", *quick)
        train(g, "ppo", ENV, *eng, "--device", "tpu", *quick, needles=("unknown device",))
        train(g, "ppo", ENV, *eng, "--device", "cuda:7", *quick, needles=("cuda:7",))
        train(g, "ppo", ENV, *eng, "--device", "", *quick)
        train(g, "ppo", ENV, *eng, "--set", "bogus_key=1", *quick, needles=("bogus_key",))
        train(g, "ppo", ENV, *eng, "--set", "gamma=2", *quick, needles=("gamma",))
        train(g, "ppo", ENV, *eng, "--timesteps", "abc", "--run-dir", "run", needles=("--timesteps",))
        train(g, "ppo", ENV, *eng, "--n-envs", "0", *quick, needles=("--n-envs",))
        train(g, "ppo", ENV, *eng, "--run-dir", "afile/sub", "--timesteps", "64", setup=[text("afile")])
        train(g, "ppo", ENV, *eng, *quick, setup=[run_copy()], needles=("exists",))

    g = "train: algos per engine"
    train(g, "appo", ENV, *quick, needles=("appo",))
    train(g, "impala", ENV, *quick, needles=("impala",))
    train(g, "qrdqn", ENV, "--engine", "rllib", *quick, needles=("qrdqn",))
    train(g, "a2c", ENV, "--engine", "rllib", *quick, needles=("a2c",))
    for algo in ("ppo", "a2c", "dqn", "qrdqn"):
        train(g, algo, ENV, "--set", "gamma=0", *quick, needles=("gamma",))
        train(g, algo, ENV, "--set", "learning_rate=-1", *quick, needles=("learning_rate",))
        train(g, algo, ENV, "--set", "no_such_key=3", *quick, needles=("no_such_key",))
    for algo in ("appo", "impala", "dqn"):
        train(g, algo, ENV, "--engine", "rllib", "--set", "lr=0", *quick, needles=("lr",))

    g = "train: --set"
    for item, needles in [
        ("gamma", ("gamma",)),
        ("=3", ()),
        ("gamma=", ("gamma",)),
        ("gamma=abc", ("gamma",)),
        ("gamma=.nan", ("gamma",)),
        ("gamma=.inf", ("gamma",)),
        ("gamma=-1", ("gamma",)),
        ("n_steps=0", ("n_steps",)),
        ("n_steps=1.5", ("n_steps",)),
        ("n_steps=[1", ("n_steps",)),
        ("batch_size=-1", ("batch_size",)),
        ("gae_lambda=1.5", ("gae_lambda",)),
        ("clip_range=0", ("clip_range",)),
        ("ent_coef=-0.01", ("ent_coef",)),
        ("n_epochs=0", ("n_epochs",)),
        ("policy_kwargs.net_arch=foo", ()),
        ("env_wrapper=foo", ("env_wrapper",)),
        ("learning_rate=lin_abc", ("learning_rate",)),
    ]:
        train(g, "ppo", ENV, "--set", item, *quick, needles=needles)
    for item in (
        "buffer_size=0",
        "exploration_fraction=2",
        "exploration_final_eps=-0.1",
        "train_freq=0",
        "target_update_interval=0",
        "learning_starts=-1",
        "batch_size=0",
        "train_freq=[0, step]",
    ):
        train(g, "dqn", ENV, "--set", item, *quick, needles=(item.split("=")[0],))

    g = "train: --env-kwarg"
    for item in (
        "crop_score",
        "=1",
        "bogus=1",
        "frame_stack=0",
        "frame_stack=abc",
        "frame_skip=0",
        "noop_max=-1",
        "sticky_actions=2",
        "sticky_actions=abc",
        "screen_size=2",
        "crop_score=[1,2]",
        "render_mode=human",
        "max_episode_steps=0",
    ):
        train(g, "ppo", ENV, "--env-kwarg", item, *quick)
    train(g, "ppo", "RetroKit/Airstriker-Genesis-v0", "--env-kwarg", "bogus=1", *quick, needles=("bogus",))
    train(g, "ppo", "RetroKit/Airstriker-Genesis-v0", "--env-kwarg", "frame_stack=0", *quick)

    g = "train: numbers"
    for flag, values in [
        ("--timesteps", ["0", "-5", "1.5", "nan", "inf", "", "1e"]),
        ("--n-envs", ["-1", "abc", "2.7", "100000"]),
        ("--seed", ["abc", "1.5", "-1", "99999999999"]),
        ("--checkpoint-every", ["-1", "abc", "1.5"]),
        ("--eval-every", ["-1", "abc"]),
        ("--eval-episodes", ["0", "abc"]),
    ]:
        for value in values:
            argv = ["--run-dir", "run", flag, value]
            if flag != "--timesteps":
                argv += ["--timesteps", "64"]
            train(g, "ppo", ENV, *argv, needles=(flag,))
    rl = ["--engine", "rllib"]
    train(g, "ppo", ENV, *rl, "--num-gpus", "-1", *quick, needles=("--num-gpus",))
    train(g, "ppo", ENV, *rl, "--num-gpus", "abc", *quick, needles=("--num-gpus",))
    train(g, "ppo", ENV, *rl, "--num-env-runners", "0", *quick, needles=("--num-env-runners",))
    train(g, "ppo", ENV, *rl, "--envs-per-runner", "0", *quick, needles=("--envs-per-runner",))
    train(g, "ppo", ENV, "--num-env-runners", "2", *quick, needles=("--engine rllib",))
    train(g, "ppo", ENV, "--address", "auto", *quick, needles=("--engine rllib",))
    for algo in ("ppo", "a2c"):  # no replay buffer: the flag would be ignored
        train(g, algo, ENV, "--save-replay-buffer", *quick, needles=("--save-replay-buffer",))

    g = "train: run dir"
    train(g, "ppo", ENV, "--run-dir", "afile", "--timesteps", "64", setup=[text("afile")])
    train(
        g, "ppo", ENV, "--run-dir", "ro/run", "--timesteps", "64", setup=[folder("ro", 0o555)],
        read_only_binds=True, needles=("not writable",),
    )  # fmt: skip
    train(
        g, "ppo", ENV, *rl, "--run-dir", "ro/run", "--timesteps", "64", setup=[folder("ro", 0o555)],
        read_only_binds=True, needles=("not writable",),
    )  # fmt: skip
    train(g, "ppo", ENV, *quick, setup=[text("run/notes.txt")], needles=("exists",))
    train(g, "ppo", ENV, *quick, "--force", setup=[text("run/notes.txt")], needles=("not a retrokit run",))
    train(g, "ppo", ENV, "--run-dir", "", "--timesteps", "64")
    return cases


def resume_cases() -> list[Case]:
    cases: list[Case] = []

    def resume(*argv: str, setup: list[Setup] | None = None, needles: tuple[str, ...] = (), **kw) -> None:
        argv_ = ["train", "--resume", *argv]
        cases.append(Case("train --resume", argv_, setup=setup or [], needles=needles, **kw))

    good = [run_copy()]
    resume("missing")
    resume("afile", setup=[text("afile")])
    resume("empty", setup=[folder("empty")])
    resume("notes", setup=[text("notes/a.txt")])
    resume("run", "--set", "gamma=0.9", setup=good, needles=("--set",))
    resume("run", "--engine", "rllib", setup=good, needles=("--engine",))
    resume("run", "--timesteps", "10", setup=good, needles=("10",))
    resume("run", "--timesteps", "abc", setup=good, needles=("--timesteps",))
    cases.append(Case("train --resume", ["train", "ppo", ENV, "--resume", "run"], setup=good))
    resume("run", "--timesteps", "640", setup=[run_copy(), edit_config(lambda t: "a: [b\n: :\n")])
    resume("run", "--timesteps", "640", setup=[run_copy(), edit_config(lambda t: "")])
    resume("run", "--timesteps", "640", setup=[run_copy(), edit_config(lambda t: "- 1\n- 2\n")])
    resume("run", "--timesteps", "640", setup=[run_copy(), drop_field("env_id")], needles=("env_id",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("env_id", "RetroKit/Bogus-v0")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("n_envs", "abc")], needles=("n_envs",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("algo", "dqn")], needles=("algo",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("algo", "bogus")], needles=("algo",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("engine", "bogus")], needles=("engine",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("network", "bogus")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("seed", "abc")], needles=("seed",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("device", "tpu")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("backend", "bogus")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("env_kwargs", "{bogus: 1}")])
    resume("run", "--timesteps", "640", setup=[run_copy(), drop_field("hyperparams")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("config.yaml", "remove")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints", "remove")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/*.zip", "text")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/*.zip", "truncate")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/*.zip", "foreign")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/model_64_steps.zip", "text")])
    # a newest checkpoint cut short (a zip's first half) is removed, saying so, and the run resumes from 32
    resume(
        "run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/model_64_steps.zip", "truncate")],
        expect="clean", exit_code=0, writes_nothing=False,
        check=trained_to(640, "model_64_steps.zip: not a complete zip", "model_32_steps.zip (32 steps)"),
    )  # fmt: skip
    # an edited config.yaml is honoured (a hyperparameter) or refused before anything is written or removed
    # (what the checkpoint's weights fix), even with a checkpoint cut short that a resume would remove
    wider = edit_config(lambda t: t.replace("net_arch: []", "net_arch: [64]"))
    resume("run", "--timesteps", "640", setup=[run_copy(), wider], needles=("net_arch is [64]",))
    resume(
        "run", "--timesteps", "640", needles=("policy_kwargs.net_arch",),
        setup=[run_copy(), damage("checkpoints/model_64_steps.zip", "truncate"), wider],
    )  # fmt: skip
    impala = set_field("network", "impala")
    resume("run", "--timesteps", "640", setup=[run_copy(), impala], needles=("network 'impala'",))
    resume(
        "run", "--timesteps", "128", expect="clean", exit_code=0, writes_nothing=False,
        setup=[run_copy(), edit_config(lambda t: t.replace("ent_coef: 0.01", "ent_coef: 0.02"))],
        check=trained_to(128, "ent_coef: 0.02"),
    )  # fmt: skip
    # damaged logs (not UTF-8, NUL bytes, cut-off lines, an emptied monitor CSV, a part of a killed resume)
    # never stop a resume; a damaged config.yaml is one line and leaves every byte as it was
    resume(
        DL, "--timesteps", "128", expect="clean", exit_code=0, writes_nothing=False,
        setup=[
            *DAMAGED_LOGS, append_bytes(f"{DL}/progress.part1.csv", b"time/total_timesteps,x\n\xff\n\0", "wb")
        ],
        check=trained_to(128, "progress logs: left out", run=DL),
    )  # fmt: skip
    resume(DL, "--timesteps", "640", setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/config.yaml", b"\xff\xfe\0")])
    resume(DL, "--timesteps", "640", setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/config.yaml", b"\0\0\n")])
    resume(DL, "--timesteps", "640", setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/config.yaml", b"", "wb")])
    return cases


def model_cases() -> list[Case]:
    """eval / record / export of runs and model files."""
    cases: list[Case] = []
    good = [run_copy()]
    rom = FIXTURE["missing_rom"]
    for cmd in ("eval", "record"):
        g = f"{cmd}: targets"
        extra = ["--out", "a.mp4"] if cmd == "record" else []
        cases += [
            Case(g, [cmd, "missing", *extra]),
            Case(g, [cmd, "empty", *extra], setup=[folder("empty")]),
            Case(g, [cmd, "notes.txt", "--env", ENV, *extra], setup=[text("notes.txt")]),
            Case(g, [cmd, "model.zip", *extra], setup=[text("model.zip")], needles=("--env",)),
            Case(g, [cmd, "model.zip", "--env", ENV, *extra], setup=[text("model.zip")]),
            Case(g, [cmd, "model.zip", "--env", ENV, *extra], setup=[truncated_model("model.zip")]),
            Case(g, [cmd, "model.zip", "--env", ENV, *extra], setup=[foreign_zip("model.zip")]),
            Case(g, [cmd, "run", *extra], setup=[run_copy(), damage("model.zip", "text")]),
            Case(g, [cmd, "run", *extra], setup=[run_copy(), damage("config.yaml", "text")]),
            Case(g, [cmd, "run", *extra], setup=[run_copy(), set_field("engine", "bogus")]),
            Case(
                g,
                [cmd, "run", *extra],
                setup=[run_copy(), damage("model.zip", "remove"), damage("checkpoints/*.zip", "remove")],
            ),  # fmt: skip
            Case(
                g,
                [cmd, "run", *extra],
                setup=[run_copy(), damage("model.zip", "truncate"), damage("checkpoints/*.zip", "truncate")],
            ),  # fmt: skip
        ]
        g = f"{cmd}: options"
        cases += [
            Case(g, [cmd, "run", *extra, "--episodes", "0"], setup=good, needles=("--episodes",)),
            Case(g, [cmd, "run", *extra, "--episodes", "abc"], setup=good, needles=("--episodes",)),
            Case(g, [cmd, "run", *extra, "--seed", "abc"], setup=good, needles=("--seed",)),
            Case(g, [cmd, "run", *extra, "--seed", "-1"], setup=good, needles=("--seed",)),
            Case(g, [cmd, "run", *extra, "--env", "RetroKit/Bogus-v0"], setup=good),
            Case(g, [cmd, "run", *extra, "--env", "Pong-v0"], setup=good, needles=("RetroKit/Pong-v0",)),
            Case(g, [cmd, "run", *extra, "--env", "RetroKit/Breakout-v0"], setup=good, needles=("expects",)),
            Case(g, [cmd, "run", *extra, "--env", rom], setup=good, needles=("import-roms",)),
            Case(g, [cmd, "run", *extra, "--device", "tpu"], setup=good, needles=("unknown device",)),
            Case(g, [cmd, "run", *extra, "--device", "cuda:7"], setup=good, needles=("cuda:7",)),
        ]
    g = "eval: options"
    cases += [
        Case(g, ["eval", "run", "--env-kwarg", "frame_stack=2"], setup=good, needles=("expects",)),
        Case(g, ["eval", "run", "--env-kwarg", "bogus=1"], setup=good, needles=("bogus",)),
        Case(g, ["eval", "run", "--env-kwarg", "crop_score"], setup=good, needles=("--env-kwarg",)),
        Case(g, ["eval", "run", "--episodes", "-3"], setup=good, needles=("--episodes",)),
    ]
    g = "record: --out"
    cases += [
        Case(g, ["record", "run", "--out", "x.txt"], setup=good, needles=(".mp4",)),
        Case(g, ["record", "run", "--out", "videos"], setup=[*good, folder("videos")], needles=("folder",)),
        Case(g, ["record", "run", "--out", "videos.mp4"], setup=[*good, folder("videos.mp4")]),
        Case(g, ["record", "run", "--out", "missing/a.mp4"], setup=good, needles=("does not exist",)),
        Case(g, ["record", "run", "--out", "afile/a.mp4"], setup=[*good, text("afile")]),
        Case(
            g,
            ["record", "run", "--out", "ro/a.mp4"],
            setup=[*good, folder("ro", 0o555)],
            read_only_binds=True,
            needles=("not writable",),
        ),  # fmt: skip
        Case(g, ["record", "run", "--out", ""], setup=good),
        Case(g, ["record", "run", "--max-steps", "0"], setup=good, needles=("--max-steps",)),
        Case(g, ["record", "run", "--max-steps", "abc"], setup=good, needles=("--max-steps",)),
        Case(g, ["record", "run", "--max-steps", "-1"], setup=good, needles=("--max-steps",)),
    ]
    g = "export"
    cases += [
        Case(g, ["export", "missing", "out"]),
        Case(g, ["export", "notes", "out"], setup=[text("notes/a.txt")]),
        Case(g, ["export", "run", "out"], setup=[*good, text("out/keep.txt")], needles=("out",)),
        Case(g, ["export", "run", "afile"], setup=[*good, text("afile")], needles=("afile",)),
        Case(g, ["export", "run", "missing/sub/out"], setup=good, needles=("does not exist",)),
        Case(
            g,
            ["export", "run", "ro/out"],
            setup=[*good, folder("ro", 0o555)],
            read_only_binds=True,
            needles=("not writable",),
        ),  # fmt: skip
        Case(g, ["export", "run", "run"], setup=good),
        Case(
            g,
            ["export", "run", "out"],
            setup=[run_copy(), damage("model.zip", "remove"), damage("checkpoints/*.zip", "remove")],
        ),  # fmt: skip
        Case(g, ["export", "run", "out"], setup=[run_copy(), damage("model.zip", "text")]),
        Case(g, ["export", "run", "out"], setup=[run_copy(), damage("config.yaml", "text")]),
    ]
    return cases


def other_cases() -> list[Case]:
    cases: list[Case] = []
    g = "plot"
    good = [run_copy()]
    cases += [
        Case(g, ["plot", "missing"]),
        Case(g, ["plot", "afile"], setup=[text("afile")]),
        Case(g, ["plot", "empty"], setup=[folder("empty")], needles=("empty",)),
        Case(g, ["plot", "run", "--smooth", "0"], setup=good, needles=("--smooth",)),
        Case(g, ["plot", "run", "--smooth", "abc"], setup=good, needles=("--smooth",)),
        Case(g, ["plot", "run", "--smooth", "-3"], setup=good, needles=("--smooth",)),
        Case(g, ["plot", "run", "--x", "bogus"], setup=good, needles=("--x",)),
        Case(g, ["plot", "run", "--out", "c.jpg"], setup=good, needles=(".png",)),
        Case(g, ["plot", "run", "--out", "dir.png"], setup=[*good, folder("dir.png")]),
        Case(g, ["plot", "run", "--out", "missing/c.png"], setup=good, needles=("does not exist",)),
        Case(
            g,
            ["plot", "run", "--out", "ro/c.png"],
            setup=[*good, folder("ro", 0o555)],
            read_only_binds=True,
            needles=("not writable",),
        ),  # fmt: skip
        Case(
            g,
            ["plot", "run"],
            setup=[monitor_csv(GOOD_CSV + "abc,def,ghi\n,,\n")],
            expect="warning",
            writes_nothing=False,
            needles=("skipped 2 row",),
        ),  # fmt: skip
        # damaged logs never stop the plot (issue 32): one warning line naming the file, the rest is plotted
        *(
            Case(
                g,
                ["plot", DL],
                setup=[monitor_csv(body, run=DL)],
                expect="warning",
                writes_nothing=False,
                needles=(f"{DL}/monitor/0.monitor.csv: {words}",),
            )
            for body, words in [
                ("", "empty"),
                ("garbage\n\x00\x01\x02\n", "not a monitor CSV"),
                ('#{"t_start": 0}\nx,y\n1,2\n', "not a monitor CSV"),
                (GOOD_CSV.replace("\nr,l,t", ""), "no r,l,t header line"),
                (GOOD_CSV.replace('"t_start": 0', '"t_start": null'), "no start time"),
            ]
        ),
        Case(
            g,
            ["plot", DL],
            setup=DAMAGED_LOGS,
            expect="warning",
            writes_nothing=False,
            needles=(f"{DL}/monitor/0.monitor.csv: skipped 2 row",),
        ),
        Case(
            g,
            ["plot", DL],
            setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/monitor/0.monitor.csv", b"", "wb")],
            expect="warning",
            writes_nothing=False,
            needles=(f"{DL}/monitor/0.monitor.csv: empty",),
        ),
        # a warning, and the run plotted with 0 games (as a run that has not finished a game yet)
        Case(
            g,
            ["plot", "run"],
            setup=[monitor_csv("r,l,t\nabc,def,ghi\n")],
            expect="warning",
            writes_nothing=False,
            needles=("skipped 1 row",),
        ),  # fmt: skip
    ]
    g = "list"
    cases += [
        Case(g, ["list", "--system", "bogus"], needles=("bogus",)),
        Case(g, ["list", "extra"]),
        Case(g, ["list"], expect="clean", close_stdout=True),
    ]
    g = "import-roms"
    cases += [
        Case(g, ["import-roms", "missing"]),
        Case(g, ["import-roms"]),
        # not ROMs: reported as skipped (exit 0), nothing installed or written
        Case(g, ["import-roms", "notes.txt"], setup=[text("notes.txt")], expect="clean"),
        Case(g, ["import-roms", "z"], setup=[text("z/bad.zip", b"PK\x03\x04garbage")], expect="clean"),
        Case(g, ["import-roms", "roms"], setup=[folder("roms", 0o000)], read_only_binds=True),
    ]
    g = "bench"
    rom = FIXTURE["missing_rom"]
    cases += [
        Case(g, ["bench", "RetroKit/Bogus-v0"]),
        Case(g, ["bench", "Pong-v0"], needles=("RetroKit/Pong-v0",)),
        Case(g, ["bench", rom], needles=("import-roms",)),
        Case(g, ["bench", ENV, "--backends", "bogus"], needles=("bogus",)),
        Case(g, ["bench", ENV, "--n-envs", "0"], needles=("--n-envs",)),
        Case(g, ["bench", ENV, "--steps", "abc"], needles=("--steps",)),
    ]
    g = "top level"
    cases += [Case(g, []), Case(g, ["bogus"]), Case(g, ["--bogus"])]
    return cases


# ------------------------------------------------------------------------------------------------------
# Python API cases: bad calls on vector envs and on the stable-retro single env (docs/vectorization.md,
# "Bad calls"). Each case runs this script as ``--api-child kind call value good|bad``: on every target it
# resets the env and a fresh twin with one seed, makes the call on the env (on both if it is a good one),
# then drives both with the same good calls, and prints ``game<TAB>target<TAB>error line<TAB>same|DIFFERENT``.
# ------------------------------------------------------------------------------------------------------

API_N = 2
API_TIMEOUT_S = 600  # a case builds 8 vector envs (8 worker processes among them): minutes on busy cores
API_VECTOR = [
    ("RetroKit/Pong-v0", "native"),
    ("RetroKit/Pong-v0", "subprocess"),
    ("RetroKit/Pong-v0", "inprocess"),
    ("RetroKit/Pong-Atari2600-v0", "subprocess"),
]
API_RETRO = "RetroKit/Pong-Atari2600-v0"  # single env: in this process, then its twin in a worker process


def api_cases() -> list[Case]:
    """Values: Python expressions of ``np``, ``N`` (envs), ``n`` (the game's actions), ``U32`` (2**32 - 1)."""
    cases: list[Case] = []

    def api(
        group: str,
        kind: str,
        call: str,
        value: str,
        *needles: str,
        good: bool = False,
        agree: str = "message",
    ):
        argv = [kind, call, value, "good" if good else "bad"]
        cases.append(Case(group, argv, expect="api", needles=needles, agree=agree))

    g = "api: vector step"
    for value, needle in [
        ("1.0", "not a sequence"), ("np.float32(1)", "not a sequence"), ("3", "not a sequence"),
        ("[1.0] * N", "(float)"), ("np.ones(N, dtype=np.float32)", "dtype float32"),
        ("[-1] * N", "out of range"),
        ("[0] * (N - 1)", "got 1 action"), ("[0] * (N + 1)", "got 3 actions"),
        ("np.zeros((N, 1), dtype=int)", "shape (2, 1)"), ("[0] * (N - 1) + [n]", "out of range"),
        ("None", "got None"), ("'0' * N", "(str)"), ("['0'] * N", "(str)"),
        ("np.array([True] * N)", "dtype bool"), ("np.zeros(N, dtype=np.uint64)", "dtype uint64"),
    ]:  # fmt: skip
        api(g, "vector", "step", value, "ValueError: step() needs 2 actions, one int in [0, ", needle)
    for value in ("np.ones(N, dtype=np.int32)", "[True] * N", "[np.int64(1)] * N", "(np.uint8(2),) * N"):
        api(g, "vector", "step", value, "no error", good=True)
    g = "api: vector reset seed"
    for value, needle in [
        ("-1", "got -1"), ("-(2**70)", "got -"), ("1.5", "(float)"), ("True", "(bool)"), ("'7'", "(str)"),
        ("[0] * (N - 1)", "got 1 seed"), ("[0] * (N + 1)", "got 3 seeds"),
        ("[-1] + [0] * (N - 1)", "env 0's seed"),
        ("[1.0] * N", "(float)"), ("np.zeros((1, N), dtype=int)", "shape (1, 2)"),
    ]:  # fmt: skip
        api(
            g, "vector", "reset", value, "ValueError: seed must be None, an int >= 0 (env i is seeded", needle
        )
    for value in (
        "0", "U32 - (N - 1)", "U32", "2**64", "list(range(N))", "np.int64(5)",
        "np.array([U32, 2**31], dtype=np.uint32)",
    ):  # fmt: skip
        api(g, "vector", "reset", value, "no error", good=True)
    g = "api: vector attributes"
    api(g, "vector", "get_attr", "'no_such_attribute'", "AttributeError: ", agree="type")
    api(g, "vector", "call", "'no_such_method'", "AttributeError: ", agree="type")
    api(g, "vector", "set_attr", "[1, lambda: None]", agree="none")  # does not pickle (subprocess)
    api(g, "vector", "call_step", "n", agree="none")  # the action reaches the workers' own stacks
    g = "api: retro single env"
    for value, needle in [
        ("1.0", "(float)"), ("np.float32(1)", "(float32)"), ("-1", "out of range"), ("n", "out of range"),
        ("None", "got None"), ("'0'", "(str)"), ("[0]", "(list)"), ("np.array([1])", "shape (1,)"),
        ("np.True_", "(bool)"), ("np.uint64(1)", "(uint64)"),
    ]:  # fmt: skip
        api(g, "single", "step", value, "ValueError: action must be an int in [0, 17] (Discrete(18))", needle)
    for value in ("True", "np.int8(1)", "np.array(1)"):
        api(g, "single", "step", value, "no error", good=True)
    for value, needle in [
        ("-1", "got -1"), ("1.5", "(float)"), ("True", "(bool)"), ("np.True_", "(bool)"), ("'7'", "(str)"),
        ("[1]", "(list)"),
    ]:  # fmt: skip
        api(g, "single", "reset", value, "ValueError: seed must be None or an int >= 0; got", needle)
    for value in ("0", "U32", "2**64", "np.int64(5)"):
        api(g, "single", "reset", value, "no error", good=True)
    api(g, "single", "get_attr", "'no_such_attribute'", "AttributeError: ", agree="type")
    return cases


def _api_do(env, kind: str, call: str, value) -> None:
    vector = kind == "vector"
    if call == "step":
        env.step(value)
    elif call == "reset":
        env.reset(seed=value)
    elif call == "get_attr":
        env.get_attr(value) if vector else env.get_wrapper_attr(value)
    elif call == "call":
        env.call(value, 1)
    elif call == "set_attr":
        env.set_attr("sweep_marker", value)
    elif call == "call_step":
        env.call("step", value)


def _api_follow(env, kind: str) -> list:
    """The good calls after the case's call: three steps, a seeded reset, two steps; their observations."""
    steps = [[i % 3, (i + 1) % 3] if kind == "vector" else i % 3 for i in range(5)]
    out = [env.step(a)[0] for a in steps[:3]]
    out.append(env.reset(seed=4)[0])
    return out + [env.step(a)[0] for a in steps[3:]]


def _api_target(game: str, target: str, kind: str, call: str, expr: str, good: bool, envs: tuple) -> str:
    import numpy as np

    env, twin = envs
    for e in envs:
        e.reset(seed=3)
    space = env.single_action_space if kind == "vector" else env.action_space
    value = eval(expr, {"np": np, "N": API_N, "n": int(space.n), "U32": 2**32 - 1})  # the sweep's own text
    try:
        _api_do(env, kind, call, value)
        error = "no error"
    except Exception as exc:  # noqa: BLE001 - reported, then checked by the sweep
        error = f"{type(exc).__name__}: {exc}".replace("\n", "\\n")  # a second line shows as \n
    if good:
        _api_do(twin, kind, call, value)
    pairs = zip(_api_follow(env, kind), _api_follow(twin, kind), strict=True)
    same = all(np.array_equal(a, b) for a, b in pairs)
    return f"{game}\t{target}\t{error}\t{'same' if same else 'DIFFERENT'}"


def api_child(kind: str, call: str, expr: str, good: str) -> int:
    import gymnasium as gym

    import retro_atari_kit  # noqa: F401

    if kind == "vector":
        for game, backend in API_VECTOR:
            envs = tuple(gym.make_vec(game, num_envs=API_N, backend=backend) for _ in range(2))
            try:
                print(_api_target(game, backend, kind, call, expr, good == "good", envs), flush=True)
            finally:
                for env in envs:
                    env.close()
        return 0
    local = gym.make(API_RETRO)
    remote = gym.make(API_RETRO)  # this process has an emulator: the second env runs in a worker
    try:
        print(_api_target(API_RETRO, "in-process", kind, call, expr, good == "good", (local, remote)))
        print(_api_target(API_RETRO, "worker", kind, call, expr, good == "good", (remote, local)))
    finally:
        remote.close()
        local.close()
    return 0


def api_problems(case: Case, code: int, stdout: str) -> list[str]:
    """Every target answered, agreed on the error as ``case.agree`` asks, and played on as its twin."""
    problems = [] if code == 0 else [f"exit {code}, not 0"]
    rows = [line.split("\t") for line in stdout.splitlines() if line.strip()]
    targets = len(API_VECTOR) if case.argv[0] == "vector" else 2
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


# ------------------------------------------------------------------------------------------------------
# the RLlib engine: --set values refused before Ray starts, --address at services that are not a Ray head
# (started here, for the sweep's lifetime), --resume of an RLlib run whose config.yaml was edited
# ------------------------------------------------------------------------------------------------------

RLLIB_SMALL = [
    "--engine", "rllib", "--num-env-runners", "1", "--envs-per-runner", "2",
    "--set", "train_batch_size_per_learner=32", "--set", "rollout_fragment_length=16",
    "--set", "min_time_s_per_iteration=1", "--checkpoint-every", "0",
]  # fmt: skip
_SERVICES: dict[str, str] = {}  # kind -> HOST:PORT, started once per sweep
_RLLIB_LOCK = threading.Lock()


def not_ray_heads() -> dict[str, str]:
    """A TCP listener that never answers, a web server, a gRPC server without Ray's GCS, a closed port."""
    if _SERVICES:
        return _SERVICES
    import http.server
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # the kernel completes connections; nothing ever reads or writes
    _SERVICES["listener"] = f"127.0.0.1:{listener.getsockname()[1]}"

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    _SERVICES["web"] = f"127.0.0.1:{web.server_address[1]}"
    try:
        from concurrent.futures import ThreadPoolExecutor as Pool

        import grpc

        rpc = grpc.server(Pool(max_workers=1))
        _SERVICES["grpc"] = f"127.0.0.1:{rpc.add_insecure_port('127.0.0.1:0')}"
        rpc.start()
    except ImportError:  # no grpcio (it comes with Ray): that case is left out
        pass
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        _SERVICES["closed"] = f"127.0.0.1:{closed.getsockname()[1]}"
    _SERVICES["_keep"] = (listener, web)  # type: ignore[assignment]  (held open until the sweep ends)
    return _SERVICES


def rllib_run_copy(name: str = "run") -> Setup:
    """A copy of a finished 64-step APPO run (real Ray; trained on first use, once per sweep)."""

    def setup(d: Path) -> None:
        with _RLLIB_LOCK:
            if "rllib_run" not in FIXTURE:
                base = d.parent / "rllib-fixture"
                base.mkdir()
                argv = [RETROKIT, "train", "appo", ENV, "--run-dir", "run", "--timesteps", "64", *RLLIB_SMALL]
                res = subprocess.run(
                    argv, cwd=base, capture_output=True, text=True, env=CHILD_ENV, timeout=900
                )
                if res.returncode != 0:
                    raise RuntimeError(f"could not train the RLlib fixture run:\n{res.stderr[-3000:]}")
                FIXTURE["rllib_run"] = str(base / "run")
        shutil.copytree(FIXTURE["rllib_run"], d / name, symlinks=True)

    return setup


def rllib_cases() -> list[Case]:
    cases: list[Case] = []
    quick = ["--engine", "rllib", "--run-dir", "run", "--timesteps", "64"]
    g = "train rllib: --set"
    for algo, item in [
        ("ppo", "gamma=abc"), ("ppo", "lr=abc"), ("ppo", "num_epochs=1.5"), ("ppo", "use_kl_loss=abc"),
        ("ppo", "kl_coeff=-1"), ("ppo", "entropy_coeff=[[0, 0.01], [1e6, -1]]"),
        ("ppo", "minibatch_size=100000"), ("ppo", "grad_clip_by=bogus"), ("ppo", "num_env_runners=2"),
        ("ppo", "encoder_kwargs={bogus: 1}"), ("ppo", "encoder_kwargs={features_dim: 0}"),
        ("ppo", "channels_last=abc"), ("ppo", "sample_timeout_s=0"),
        ("appo", "circular_buffer_num_batches=0"), ("appo", "broadcast_interval=0"),
        ("appo", "minibatch_size=7"),
        ("impala", "vtrace_clip_rho_threshold=-1"), ("impala", "learner_queue_size=0"),
        ("dqn", "training_intensity=0"), ("dqn", "replay_buffer_config.capacity=0"),
        ("dqn", "replay_buffer_config={capacity: 0}"), ("dqn", "epsilon=2"), ("dqn", "epsilon=[[0, 1.5]]"),
        ("dqn", "num_atoms=51"), ("dqn", "td_error_loss_fn=bogus"), ("dqn", "dueling=abc"),
        ("dqn", "single_frame_replay=abc"), ("dqn", "n_step=0"),
    ]:  # fmt: skip
        key = item.split("=")[0].split(".")[0]
        cases.append(Case(g, ["train", algo, ENV, *quick, "--set", item], needles=(key,)))
    if not _cuda():
        gpu = ["train", "ppo", ENV, *quick, "--set", "num_gpus_per_learner=1"]
        cases.append(Case(g, gpu, needles=("GPU",)))
    g = "train rllib: --address"
    for kind, address in not_ray_heads().items():
        if not kind.startswith("_"):
            argv = ["train", "appo", ENV, *RLLIB_SMALL, "--address", address, "--run-dir", "run"]
            cases.append(Case(g, [*argv, "--timesteps", "64"], needles=(address,)))
    cases.append(Case(g, ["train", "appo", ENV, *quick, "--address", "abc"], needles=("HOST:PORT",)))
    g = "train --resume rllib"

    def add(line: str) -> Setup:  # a line under hyperparameters:
        return edit_config(lambda t: t.replace("  gamma: 0.99", f"  gamma: 0.99\n  {line}"))

    for setup, needles in [
        (edit_config(lambda t: t.replace("network: nature", "network: impala")), ("network",)),
        (edit_config(lambda t: t.replace("algo: appo", "algo: ppo")), ("algo",)),
        (edit_config(lambda t: t.replace("  gamma: 0.99", "  gamma: 2")), ("gamma",)),
        (edit_config(lambda t: t.replace("  gamma: 0.99", "  gamma: abc")), ("gamma",)),
        (add("encoder_kwargs: {features_dim: 256}"), ("encoder_kwargs",)),
        (add("dueling: abc"), ("dueling",)),
        (damage("checkpoints/*/policy.pt", "text"), ("cannot read checkpoint",)),
        (damage("checkpoints", "remove"), ("no checkpoint",)),
    ]:  # fmt: skip
        argv = ["train", "--resume", "run", "--timesteps", "640"]
        cases.append(Case(g, argv, setup=[rllib_run_copy(), setup], needles=needles))
    return cases


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# ------------------------------------------------------------------------------------------------------
# stop signals, lost output and writes cut short: the command runs in its own session, and a signal goes to
# its whole process group, as systemd, Slurm's scancel and `kill -TERM -PGID` send it (docs/cli.md,
# "Stopping and resuming")
# ------------------------------------------------------------------------------------------------------

LIVE_TIMEOUT_S = 600  # start, train to a checkpoint, stop: Ray or a retro game take minutes on busy cores
_CHECKPOINT = re.compile(r"^model_(\d+)_steps(\.zip)?$")
STREAMS = {"stdout": 1, "stderr": 2}


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

    return setup


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
                if proc.poll() is None and case.send_signal == "SIGKILL to an env worker":
                    os.kill(_env_workers(proc.pid)[-1], signal.SIGKILL)
                elif proc.poll() is None:
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


def stop_cases() -> list[Case]:
    cases: list[Case] = []
    run = ["--run-dir", "run"]
    ppo = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "64"]

    def live(group: str, *argv: str, **kw) -> None:
        kw = {"expect": "clean", "writes_nothing": False, "exit_code": 0, **kw}
        cases.append(Case(group, ["train", *argv], **kw))

    g = "train: SIGTERM to the process group"
    stop = {"send_signal": "SIGTERM", "check": stopped_and_saved()}
    forever = ["--timesteps", "1e6", *run]
    for backend in ("native", "subprocess", "inprocess"):
        live(g, "ppo", ENV, "--backend", backend, *ppo, *forever, **stop)
    live(g, "ppo", "RetroKit/Airstriker-Genesis-v0", *ppo, *forever, **stop)
    live(
        g, "dqn", ENV, "--preset", "pong-dqn-fast", "--set", "parallel_play.when=always", "--set",
        "learning_starts=64", "--set", "buffer_size=1000", "--n-envs", "2", "--checkpoint-every", "128",
        *forever, **stop,
    )  # fmt: skip
    live(
        g, "appo", ENV, "--engine", "rllib", "--num-env-runners", "1", "--envs-per-runner", "2", "--set",
        "train_batch_size_per_learner=32", "--set", "rollout_fragment_length=16", "--set",
        "min_time_s_per_iteration=1", "--checkpoint-every", "32", *forever, **stop,
    )  # fmt: skip
    g = "train: SIGHUP to the process group (terminal closed)"
    live(g, "ppo", ENV, *ppo, *forever, send_signal="SIGHUP", check=stopped_and_saved())
    gone = {"send_signal": "SIGHUP", "closed": ("stdout", "stderr"), "check": stopped_and_saved("run", False)}
    live(f"{g}, stdout and stderr closed", "ppo", ENV, *ppo, *forever, **gone)  # nothing can be written
    for delay in ("0.3", "0.6", "1", "2", "4"):  # importing, parsing, checking, building envs
        g = f"train: Ctrl-C {delay} s after the start"
        cases.append(
            Case(g, ["train", "ppo", ENV, "--n-envs", "2", *run], expect="interrupted", send_signal="SIGINT",
                 signal_when=delay)
        )  # fmt: skip
    for closed in (("stdout",), ("stderr",), ("stdout", "stderr")):
        g = f"train: lost output ({' and '.join(closed)} closed at the start)"
        live(g, "ppo", ENV, *ppo, "--timesteps", "128", *run, closed=closed, check=trained_to(128))
    g = "train: lost output (the reader of stdout goes away)"
    live(g, "ppo", ENV, *ppo, "--timesteps", "128", *run, close_stdout=True, check=trained_to(128))
    g = "train --resume: writes cut short"
    live(
        g, "--resume", "run", "--timesteps", "96",
        setup=[
            run_copy(), cut_copy("checkpoints/.model_96_steps.tmp-999999.zip"),
            folder("run/checkpoints/.model_128_steps.tmp-999998"), cut_copy("checkpoints/model_96_steps.zip"),
        ],
        check=trained_to(96, "model_64_steps.zip (64 steps)", "tmp-999999.zip: a write cut short"),
    )  # fmt: skip
    return cases


# ------------------------------------------------------------------------------------------------------
# the operating system says no (issue 32): a name too long, /proc, a read-only run dir or disk, a full disk,
# a folder where a file is expected, a link to nothing in the run dir, an ASCII locale; for every command
# that reads or writes paths. Each gives one line and exit 2 (or works, where nothing is wrong for it), and
# nothing saved before is lost or rewritten. Mounts (tmpfs, read-only binds) need root: without it those
# cases are skipped, saying so.
# ------------------------------------------------------------------------------------------------------


class CaseSkipped(Exception):
    """Raised by a setup when this machine cannot produce the case's fault."""


_MOUNTS: dict[str, list[str]] = {}  # case folder -> its mount points, in the order mounted
_MOUNTS_LOCK = threading.Lock()


def _mount(d: Path, *argv: str) -> None:
    """``mount ARGV`` for the case in ``d`` (its last argument is the mount point), or CaseSkipped."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        raise CaseSkipped("mounting a tmpfs or a read-only bind needs root and mount(8)")
    res = subprocess.run(["mount", *argv], capture_output=True, text=True)
    if res.returncode != 0:
        raise CaseSkipped(f"mount {' '.join(argv)}: {res.stderr.strip()}")
    with _MOUNTS_LOCK:
        _MOUNTS.setdefault(str(d), []).append(argv[-1])


def writable_mounts(d: Path) -> None:
    """Make the case's read-only binds writable again (so the folder can be cleaned), contents unchanged."""
    for point in _MOUNTS.get(str(d), []):
        subprocess.run(["mount", "-o", "remount,bind,rw", point], capture_output=True)


def release_mounts(d: Path) -> None:
    with _MOUNTS_LOCK:
        points = _MOUNTS.pop(str(d), [])
    for point in reversed(points):
        subprocess.run(["umount", "-l", point], capture_output=True)


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
            _fill(point)

    return setup


def _fill(point: Path) -> None:
    """Fill the file system at ``point`` to its last block (the file ``.filler``)."""
    with open(point / ".filler", "wb", buffering=0) as fh:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                continue


def read_only_mount(name: str) -> Setup:
    """``name`` (a folder of the case) bound onto itself read-only: EROFS for root too."""

    def setup(d: Path) -> None:
        point = str(d / name)
        _mount(d, "--bind", point, point)
        _mount(d, "-o", "remount,bind,ro", point)

    return setup


def read_only(name: str) -> Setup:
    """Every file and folder of ``name`` without write permission (with ``read_only_binds``: root too)."""

    def setup(d: Path) -> None:
        for path in [d / name, *(d / name).rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)

    return setup


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

    return setup


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


def os_cases() -> list[Case]:
    cases: list[Case] = []
    good = [run_copy()]
    works = {"expect": "clean", "exit_code": 0}  # nothing is wrong for this command: it must just work
    long = "a" * 300
    new = ["--timesteps", "64", *TINY_TRAIN]

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(f"os: {group}", list(argv), **kw))

    g = "name too long"
    add(g, "train", "ppo", ENV, "--run-dir", long, *new, needles=("File name too long", "--run-dir"))
    add(g, "train", "ppo", ENV, "--run-dir", f"runs/{long}/x", *new, needles=("File name too long",))
    add(g, "train", "appo", ENV, "--engine", "rllib", "--run-dir", long, "--timesteps", "64")
    add(g, "train", "--resume", long)
    add(g, "eval", long)
    add(g, "eval", f"run/{long}.zip", "--env", ENV, setup=good)
    for out in (f"{long}.mp4", f"{long}.gif"):
        add(g, "record", "run", "--out", out, setup=good, needles=("File name too long", "--out"))
    add(g, "plot", "run", "--out", f"{long}.png", setup=good, needles=("File name too long", "--out"))
    add(g, "plot", long)
    add(g, "export", "run", long, setup=good, needles=("File name too long",))
    add(g, "export", long, "out")
    add(g, "list", long)
    add(g, "import-roms", long)
    fits = f"{'b' * 246}.png"  # 250 bytes: fits, though its temporary's name would not without shortening
    add(g, "plot", "run", "--out", fits, setup=good, writes_nothing=False, check=made(fits), **works)

    g = "a path under /proc"
    add(g, "train", "ppo", ENV, "--run-dir", "/proc/x", *new, needles=("/proc",))
    add(g, "train", "ppo", ENV, "--run-dir", "/proc/self/x", *new, needles=("/proc",))
    add(g, "train", "appo", ENV, "--engine", "rllib", "--run-dir", "/proc/x", "--timesteps", "64")
    add(g, "train", "--resume", "/proc/self")
    add(g, "eval", "/proc/self")
    add(g, "eval", "/proc/self/status", "--env", ENV)
    for out in ("/proc/x.mp4", "/proc/x.gif", "/proc/self/x.mp4"):
        add(g, "record", "run", "--out", out, setup=good, needles=("--out",))
    add(g, "plot", "run", "--out", "/proc/x.png", setup=good, needles=("--out",))
    add(g, "plot", "/proc/self")
    add(g, "export", "run", "/proc/x", setup=good)
    add(g, "export", "/proc/self", "out")

    g = "read-only run dir (file modes)"
    ro = {"read_only_binds": True}
    add(g, "train", "--resume", "run", "--timesteps", "128", setup=[*good, read_only("run")],
        needles=("run", "writable"), **ro)  # fmt: skip
    add(g, "eval", "run", "--episodes", "1", setup=[*good, read_only("run")], **ro, **works)
    add(g, "plot", "run", setup=[*good, read_only("run")], writes_nothing=False, **ro, **works)
    add(g, "export", "run", "out", setup=[*good, read_only("run")], writes_nothing=False, **ro, **works)
    g = "read-only file system (a read-only mount)"
    mounted = [*good, read_only_mount("run")]
    add(g, "train", "--resume", "run", "--timesteps", "128", setup=mounted, needles=("Read-only",))
    add(g, "eval", "run", "--episodes", "1", setup=mounted, **works)
    add(g, "plot", "run", "--out", "run/c.png", setup=mounted, needles=("--out",))
    add(g, "export", "run", "run/out", setup=mounted)
    ro_folder = [*good, folder("ro"), read_only_mount("ro")]
    add(g, "train", "ppo", ENV, "--run-dir", "ro/run", *new, setup=ro_folder, needles=("not writable",))
    add(g, "record", "run", "--out", "ro/a.mp4", setup=ro_folder, needles=("not writable",))

    g = "disk full"
    # a new run: its first checkpoint does not fit -> nothing of value, the run dir is removed
    add(g, "train", "ppo", ENV, "--run-dir", "disk/run", *new, setup=[tmpfs("disk", "1m")],
        expect="clean", exit_code=2, writes_nothing=False,
        check=all_of(error_line("No space left"), absent("disk/run")))  # fmt: skip
    # a new run: the checkpoint at 32 steps fits, the one at 64 does not -> kept, resumable, said so
    add(g, "train", "ppo", ENV, "--run-dir", "disk/run", *new, "--checkpoint-every", "32",
        setup=[tmpfs("disk", "12m")], expect="clean", exit_code=2, writes_nothing=False,
        check=all_of(error_line("No space left", "--resume disk/run"), no_leftovers("disk/run"),
                     trained_to(32, run="disk/run")))  # fmt: skip
    # a resume: the next checkpoint does not fit -> the ones saved before are intact
    add(g, "train", "--resume", "disk/run", "--timesteps", "128",
        setup=[tmpfs("disk", "", run=True, spare_mb=8)], expect="clean", exit_code=2, writes_nothing=False,
        check=all_of(error_line("No space left", "--resume disk/run"), no_leftovers("disk/run"),
                     kept("disk/run/checkpoints/model_64_steps.zip", "checkpoints/model_64_steps.zip"),
                     kept("disk/run/model.zip", "model.zip")))  # fmt: skip
    full = [*good, tmpfs("disk", "256k"), text("disk/old.gif", "an older video\n"),
            text("disk/old.png", "an older plot\n"), lambda d: _fill(d / "disk")]  # fmt: skip
    # an older file of the same name is left as it was (writes_nothing)
    add(g, "record", "run", "--out", "disk/old.gif", "--max-steps", "40", setup=full, needles=("No space",))
    add(g, "record", "run", "--out", "disk/new.mp4", "--max-steps", "40", setup=full, needles=("No space",))
    add(g, "plot", "run", "--out", "disk/old.png", setup=full, needles=("No space",))
    add(g, "export", "run", "disk/out", setup=full, needles=("No space",))
    add(g, "list", stdout_to="/dev/full", needles=("output", "No space"))
    add(
        g,
        "eval",
        "run",
        "--episodes",
        "1",
        setup=good,
        stdout_to="/dev/full",
        expect="clean",
        exit_code=2,
        check=error_line("output", "No space"),
    )  # fmt: skip  (its progress lines are on stderr too)
    add(g, "plot", "run", setup=good, stdout_to="/dev/full", writes_nothing=False, needles=("output",))
    # training's output is a log (log.txt, progress.csv hold it): a run whose stdout is lost trains on
    add(g, "train", "ppo", ENV, "--run-dir", "run", *new, stdout_to="/dev/full", writes_nothing=False,
        check=trained_to(64), **works)  # fmt: skip

    g = "a folder where a file is expected"
    for name in ("config.yaml", "log.txt", "model.zip", "progress.csv"):
        for cmd in (["train", "--resume", "run", "--timesteps", "128"], ["eval", "run", "--episodes", "1"]):
            bad = [*good, replace_with(f"run/{name}", "folder")]
            if name == "progress.csv" and cmd[0] == "train":  # left as it was and said so: not merged
                add(g, *cmd, setup=bad, writes_nothing=False, check=trained_to(128, "progress.csv"), **works)
            elif name in ("log.txt", "progress.csv") and cmd[0] == "eval":  # not read by eval
                add(g, *cmd, setup=bad, **works)
            else:
                add(g, *cmd, setup=bad, needles=(f"run/{name}",))
    for name in ("checkpoints", "monitor"):
        add(g, "train", "--resume", "run", "--timesteps", "128",
            setup=[*good, replace_with(f"run/{name}", "file")], needles=(f"run/{name}",))  # fmt: skip
    add(
        g,
        "plot",
        "run",
        setup=[*good, replace_with("run/config.yaml", "folder")],
        writes_nothing=False,
        **works,
    )
    add(g, "export", "run", "out", setup=[*good, replace_with("run/config.yaml", "folder")],
        needles=("run/config.yaml",))  # fmt: skip
    add(g, "plot", "run", setup=[*good, replace_with("run/monitor/0.monitor.csv", "folder")],
        expect="warning", writes_nothing=False, needles=("0.monitor.csv",))  # fmt: skip
    add(g, "export", "run", "out", setup=[*good, folder("out.txt")], writes_nothing=False, **works)

    g = "a link to nothing in the run dir"
    for name in ("monitor/9.monitor.csv", "checkpoints", "model.zip", "config.yaml",
                 "checkpoints/model_64_steps.zip"):  # fmt: skip
        link = [*good, replace_with(f"run/{name}", "link")]
        resume = ["train", "--resume", "run", "--timesteps", "128"]
        if name.startswith("monitor/"):  # a log of a game: skipped, said so (plot), or not read
            add(g, *resume, setup=link, writes_nothing=False, check=trained_to(128), **works)
            add(g, "plot", "run", setup=link, expect="warning", writes_nothing=False, needles=(name,))
            add(g, "export", "run", "out", setup=link, needles=(name, "remove"))
        else:
            add(g, *resume, setup=link, needles=(f"run/{name}",) if "/" not in name else ())
            add(g, "export", "run", "out", setup=link, writes_nothing=False,
                expect="error" if name == "config.yaml" else "clean",
                exit_code=None if name == "config.yaml" else 0)  # fmt: skip
        add(g, "eval", "run", "--episodes", "1", setup=link, writes_nothing=name != "monitor/9.monitor.csv",
            **({"needles": ("run/config.yaml",)} if name == "config.yaml" else works))  # fmt: skip

    g = "ASCII locale (LC_ALL=C: Python's UTF-8 mode)"
    pong = "runs/pöng-ü"
    copy = [run_copy(pong)]
    add(g, "train", "ppo", ENV, "--run-dir", pong, *new, env=ASCII, writes_nothing=False,
        check=trained_to(64, run=pong), **works)  # fmt: skip
    add(g, "train", "--resume", pong, "--timesteps", "96", setup=copy, env=ASCII, writes_nothing=False,
        check=trained_to(96, run=pong), **works)  # fmt: skip
    add(g, "eval", pong, "--episodes", "1", setup=copy, env=ASCII, **works)
    add(g, "record", pong, "--out", "vidéo.gif", "--max-steps", "40", setup=copy, env=ASCII,
        writes_nothing=False, check=made("vidéo.gif"), **works)  # fmt: skip
    add(g, "plot", pong, "--title", "Pöng ü", "--out", "pöng.png", setup=copy, env=ASCII,
        writes_nothing=False, check=made("pöng.png"), **works)  # fmt: skip
    add(
        g,
        "plot",
        pong,
        "--title",
        "Pöng 乒乓",
        setup=copy,
        env=ASCII,
        writes_nothing=False,
        expect="warning",
        needles=("乒乓",),
    )  # fmt: skip  (glyphs the font lacks: one warning line, not one per glyph)
    add(g, "export", pong, "exp-ö", setup=copy, env=ASCII, writes_nothing=False, **works)
    add(g, "list", "pöng", env=ASCII, needles=("pöng",))
    g = "ASCII locale without UTF-8 mode (PYTHONUTF8=0)"
    for argv in (["train", "--resume", pong, "--timesteps", "96"], ["eval", pong], ["plot", pong],
                 ["record", pong, "--out", "a.mp4"], ["export", pong, "out"],
                 ["plot", "run", "--title", "Pöng"]):  # fmt: skip
        add(g, *argv, setup=[*copy, *good], env=PURE_ASCII, needles=("UTF-8",))
    g = "a name in another encoding (Latin-1 bytes)"
    latin = "r\udcf6n"  # b"r\xf6n": not UTF-8; Python holds the byte as a lone surrogate
    for argv in (["train", "--resume", latin, "--timesteps", "96"], ["eval", latin], ["plot", latin]):
        add(g, *argv, setup=[run_copy(latin)], needles=("UTF-8",))
    return cases


# ------------------------------------------------------------------------------------------------------
# files from others (a run dir is data, not code) and the machine's limits (docs/cli.md, "Files from
# others" and "Limits")
# ------------------------------------------------------------------------------------------------------

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

    return setup


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

    return setup


def torch_global(pattern: str, run: str = "run") -> Setup:
    """``policy.pth`` replaced by a torch file whose pickle names a global (what weights_only refuses)."""

    def setup(d: Path) -> None:
        import io

        import torch

        buffer = io.BytesIO()
        torch.save({"w": _Opener(str(d / MARKER))}, buffer)
        for path in (d / run).glob(pattern):
            _rewrite_zip(path, "policy.pth", lambda _raw: buffer.getvalue())

    return setup


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

    return setup


def no_marker(d: Path, output: str, before: list[int]) -> list[str]:
    return [f"{MARKER} exists: a pickle from the run dir ran"] if (d / MARKER).exists() else []


def stranger_cases() -> list[Case]:
    """Files a stranger may have made: pickles, torch globals, bombs, links out of the run dir."""
    cases: list[Case] = []
    works = {"expect": "clean", "exit_code": 0, "check": no_marker, "writes_nothing": False}

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(f"strangers: {group}", list(argv), **kw))

    planted = [run_copy(), planted_pickles("model.zip"), planted_pickles("checkpoints/*.zip")]
    g = "pickled values"
    add(g, "eval", "run", "--episodes", "1", setup=planted, **works)
    add(g, "export", "run", "out", setup=planted, **works)
    add(g, "train", "--resume", "run", "--timesteps", "96", setup=planted, **works)
    outside = [run_copy(), planted_pickles("model.zip")]
    add(g, "eval", "run/model.zip", "--env", ENV, setup=[*outside, damage("config.yaml", "remove")],
        needles=("--allow-pickle", "would unpickle"), check=no_marker)  # fmt: skip
    g = "torch globals"
    add(g, "eval", "run", setup=[run_copy(), torch_global("model.zip")], needles=("not plain weights",),
        check=no_marker)  # fmt: skip
    g = "bombs"
    add(g, "eval", "run", setup=[run_copy(), bomb("model.zip", "policy.pth", 1100)], needles=("compressed",))
    add(g, "eval", "run", setup=[run_copy(), bomb("model.zip", "data", 200)], needles=("would inflate",))
    add(g, "train", "--resume", "run", setup=[run_copy(), bomb("checkpoints/model_64_steps.zip", "policy.pth",
        1100)], needles=("compressed",))  # fmt: skip
    g = "export links"
    for name, target in (("monitor/9.monitor.csv", "secret.txt"), ("monitor/resume-1", "secrets"),
                         ("log.txt", "secret.txt"), ("model.zip", "secret.txt")):  # fmt: skip
        add(g, "export", "run", "out", setup=[run_copy(), link(name, target)], needles=("is a link to",))
    g = "rllib state"  # RLlib unpickles its state: only checkpoints this user's kit signed are resumed
    add(g, "train", "--resume", "run", "--timesteps", "160", setup=[rllib_run_copy(), tampered_rllib_state],
        needles=("no valid signature",), check=no_marker)  # fmt: skip
    return cases


def tampered_rllib_state(d: Path) -> None:
    """A byte added to each RLlib state file of the run copy's checkpoints (another pickle, as a stranger's
    would be)."""
    for path in (d / "run" / "checkpoints").glob("*/algorithm_state.pkl"):
        with open(path, "ab") as fh:
            fh.write(b"\0")


def limit_cases() -> list[Case]:
    """Sizes and counts without bounds, real limits (ulimit -v, ulimit -u), damaged inputs of the kind."""
    cases: list[Case] = []
    good = [run_copy()]
    new = ["--timesteps", "64", *TINY_TRAIN]

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(f"limits: {group}", list(argv), **kw))

    g = "sizes"
    add(g, "train", "ppo", ENV, "--run-dir", "r", "--n-envs", "10000", "--timesteps", "64", needles=("4096",),
        check=absent("r"))  # fmt: skip
    add(g, "train", "ppo", ENV, "--run-dir", "r", *new, "--env-kwarg", "screen_size=20000",
        needles=("screen_size=20000",))  # fmt: skip
    add(g, "train", "ppo", ENV, "--run-dir", "r", *new, "--env-kwarg", "frame_stack=1000000",
        needles=("frame_stack=1000000",))  # fmt: skip
    add(g, "eval", "run", "--env-kwarg", "screen_size=20000", setup=good, needles=("screen_size=20000",))
    g = "real limits"
    add(g, "train", "ppo", ENV, "--run-dir", "r", "--n-envs", "64", "--backend", "subprocess", *new[:2],
        preexec=rlimit("NPROC", 8), needles=("RLIMIT_NPROC",))  # fmt: skip
    add(g, "train", "dqn", ENV, "--run-dir", "r", "--set", "buffer_size=3000000", "--timesteps", "64",
        preexec=rlimit("AS", 6 << 30), needles=("RLIMIT_AS",))  # fmt: skip
    g = "damaged inputs"
    for field in ("env_id", "algo", "engine", "n_envs", "env_kwargs"):
        for argv in (
            ["eval", "run"],
            ["train", "--resume", "run", "--timesteps", "96"],
            ["export", "run", "o"],
        ):
            add(
                g,
                *argv,
                setup=[run_copy(), set_field(field, "[a, b]")],
                needles=(f"{field}: ['a', 'b'] is not",),
            )
    add(g, "plot", "run", "--title", "$\\foo{$", "--out", "p.png", setup=good, expect="warning",
        needles=("not valid mathtext",), writes_nothing=False)  # fmt: skip
    add(g, "plot", "run", "--out", "p.png", setup=good, expect="clean", exit_code=0, writes_nothing=False,
        env={"HOME": "/dev/null", "MPLCONFIGDIR": ""}, check=_quiet)  # fmt: skip
    add(g, "eval", "run", setup=good, preexec=deleted_cwd, needles=("was deleted",))
    return cases


def _quiet(d: Path, output: str, before: list[int]) -> list[str]:
    return ["matplotlib's cache warning"] if "Matplotlib" in output or "mkdir -p failed" in output else []


def all_cases() -> list[Case]:
    cases = train_cases() + resume_cases() + model_cases() + other_cases() + api_cases() + rllib_cases()
    return cases + stop_cases() + os_cases() + env_cases() + stranger_cases() + limit_cases()


# ------------------------------------------------------------------------------------------------------
# env: the machines and faults users have (issue 48, part B)
# ------------------------------------------------------------------------------------------------------

NO_DISPLAY = {"DISPLAY": None, "WAYLAND_DISPLAY": None, "SDL_VIDEODRIVER": None, "SDL_AUDIODRIVER": None}


def _env_workers(pid: int) -> list[int]:
    """The env worker processes of the ``retrokit`` process ``pid``: its forkserver's children (or, with
    fork, its own children but the resource tracker), from /proc."""
    table: dict[int, tuple[int, str]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        table[int(entry)] = (ppid, cmd)
    servers = {p for p, (pp, cmd) in table.items() if pp == pid and "forkserver" in cmd}
    if servers:
        return sorted(p for p, (pp, _) in table.items() if pp in servers)
    return sorted(p for p, (pp, cmd) in table.items() if pp == pid and "resource_tracker" not in cmd)


def script(name: str, body: str) -> Setup:
    """``<name>``: a Python script of the case (a file: workers of a second retro env re-import it)."""
    return text(name, body)


def says(*needles: str, once: str | None = None) -> Check:
    """The output has every needle, and ``once`` exactly once."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        problems = [f"output lacks {needle!r}" for needle in needles if needle not in output]
        if once is not None and output.count(once) != 1:
            problems.append(f"{once!r} {output.count(once)} times, not once")
        return problems

    return check


def killed_worker_then_resumed() -> Check:
    """One 'retrokit: error:' line naming the env and SIGKILL, a checkpoint, then ``--resume`` trains on."""

    def check(d: Path, output: str, before: list[int]) -> list[str]:
        errors = [line for line in output.splitlines() if line.startswith("retrokit: error: ")]
        problems = [] if len(errors) == 1 else [f"{len(errors)} 'retrokit: error:' lines, not 1"]
        for needle in (f"env rank 1 ({ENV})", "killed by SIGKILL", "resume with: retrokit train --resume"):
            if not errors or needle not in errors[0]:
                problems.append(f"error line lacks {needle!r}")
        steps = _checkpoint_steps(d / "run")  # the death's save: at or past the periodic one there was
        if not steps or (before and steps[-1] < before[-1]):
            return problems + [f"no checkpoint at or past {before[-1:]} (have {steps[-3:]})"]
        if not errors or f"training stopped at {steps[-1]} steps, checkpoint " not in errors[0]:
            problems.append(f"error line does not name the checkpoint at {steps[-1]} steps")
        res = subprocess.run(
            [RETROKIT, "train", "--resume", "run", "--timesteps", str(steps[-1] + 64)], cwd=d,
            capture_output=True, text=True, env=CHILD_ENV, timeout=LIVE_TIMEOUT_S,
        )  # fmt: skip
        if res.returncode != 0 or _checkpoint_steps(d / "run")[-1] != steps[-1] + 64:
            problems.append(f"--resume exit {res.returncode}: {res.stderr.strip()[-200:]}")
        return problems + [f"left {name}" for name in _leftovers(d / "run")]

    return check


CHECK_ENVS = """
import gymnasium as gym, retro_atari_kit
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
if __name__ == "__main__":
    for env_id in ("RetroKit/Pong-v0", "RetroKit/Airstriker-Genesis-v0"):
        env = gym.make(env_id)
        check_env(env)
        sb3_check_env(env)
        env.close()
    env = gym.make("RetroKit/Breakout-v0", render_mode="human")
    env.reset(seed=0)
    for _ in range(20):
        env.step(1)
    env.close()
    print("checked")
"""

TWO_THREADS = """
import threading, numpy as np, gymnasium as gym, retro_atari_kit
if __name__ == "__main__":
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")
    venv.reset(seed=0)
    refused, done = [], threading.Event()
    def play():
        while not done.is_set():
            try:
                venv.step(np.zeros(2, dtype=np.int64))
            except RuntimeError as exc:
                refused.append(str(exc)); done.set()
    threads = [threading.Thread(target=play, daemon=True) for _ in range(2)]
    [t.start() for t in threads]
    done.wait(120); done.set(); [t.join(60) for t in threads]
    assert not any(t.is_alive() for t in threads), "deadlock"
    print(refused[0] if refused else "no overlap")
    import copy, pickle
    for do in (copy.deepcopy, copy.copy, pickle.dumps):
        try:
            do(venv)
        except TypeError as exc:
            print("copy refused:", exc)
    venv.step(np.zeros(2, dtype=np.int64))
    venv.close()
    print("played on")
"""

RECORD_GAMES = """
import os, gymnasium as gym, retro_atari_kit
if __name__ == "__main__":
    env = gym.make("RetroKit/Breakout-v0", render_mode="rgb_array")
    env = gym.wrappers.RecordVideo(env, "videos", episode_trigger=lambda game: game == 0, disable_logger=True)
    env.reset(seed=0)
    env.action_space.seed(0)
    lives_lost = 0
    while True:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            if "episode" in info:
                break
            lives_lost += 1
            env.reset()
    print(f"lives lost before game over: {lives_lost}; recording: {env.recording}")
    env.reset()
    env.close()
    print(sorted(os.listdir("videos")))
"""

VECTORIZATION_MODE = """
import gymnasium as gym, retro_atari_kit
if __name__ == "__main__":
    try:
        gym.make_vec("RetroKit/Pong-v0", num_envs=2, vectorization_mode="native")
    except ValueError as exc:
        print("gymnasium refuses:", exc)
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="native")
    print("backend:", venv.backend)
    venv.close()
"""

BESIDE_A_CLUSTER = """
import os, signal, socket, subprocess, sys, tempfile, time
if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]
    env = {**os.environ, "RAY_TMPDIR": tmp}
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    start = [ray, "start", "--head", "--num-cpus=1", f"--port={port}", "--include-dashboard=false",
             "--disable-usage-stats", "--block"]
    head = subprocess.Popen(start, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while not os.path.exists(os.path.join(tmp, "ray", "ray_current_cluster")):
            assert head.poll() is None and time.sleep(0.2) is None
        retrokit = os.path.join(os.path.dirname(sys.executable), "retrokit")
        small = ["--num-env-runners", "1", "--envs-per-runner", "2", "--set",
                 "train_batch_size_per_learner=32", "--set", "rollout_fragment_length=16", "--set",
                 "min_time_s_per_iteration=1", "--checkpoint-every", "0"]
        for argv, extra in (
            (["train", "appo", "RetroKit/Pong-v0", "--engine", "rllib", "--timesteps", "64", "--run-dir",
              "run", *small], {}),
            (["train", "--resume", "run", "--timesteps", "128"], {"RAY_ADDRESS": f"127.0.0.1:{port}"}),
        ):
            res = subprocess.run([retrokit, *argv], env={**env, **extra}, capture_output=True, text=True)
            said = res.stderr.strip().splitlines()[-1:] if res.returncode else ""
            print(argv[1], "exit", res.returncode, said)
        print("other cluster alive:", head.poll() is None)
    finally:  # its own process group: the blocking `ray start` and what it started, and nothing else
        for sig in (signal.SIGTERM, signal.SIGKILL):
            os.killpg(head.pid, sig)
            try:
                head.wait(10)
                break
            except subprocess.TimeoutExpired:
                pass
"""


def env_cases() -> list[Case]:
    g = "machine: what users have"
    cases = [
        Case(g, ["check.py"], [script("check.py", CHECK_ENVS)], expect="script", exit_code=0,
             writes_nothing=False, env=NO_DISPLAY, check=says("checked", once="NoDisplayWarning")),
        Case(g, ["beside.py"], [script("beside.py", BESIDE_A_CLUSTER)], expect="script", exit_code=0,
             writes_nothing=False, check=says("appo exit 0", "--resume exit 0", "other cluster alive: True")),
        Case(g, ["-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV, "--gym-packages", "retro_atari_kit",
                 "-n", "256", "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64",
                 "--eval-freq", "-1"],
             expect="script", exit_code=0, writes_nothing=False,
             check=says("hyperparameters from --conf-file retro_atari_kit.integrations.zoo.ppo")),
        Case(g, ["-m", "rl_zoo3.train", "--algo", "qrdqn", "--env", ENV, "--gym-packages", "retro_atari_kit"],
             expect="script", exit_code=1, check=says("pass --conf-file", once="retro-atari-kit:")),
        Case(g, ["record.py"], [script("record.py", RECORD_GAMES)], expect="script", exit_code=0,
             writes_nothing=False,
             check=says("lives lost before game over: 4; recording: True", "['rl-video-episode-0.mp4']")),
        Case(g, ["vecmode.py"], [script("vecmode.py", VECTORIZATION_MODE)], expect="script", exit_code=0,
             writes_nothing=False, check=says("Invalid vectorization mode: 'native'", "backend: native")),
    ]  # fmt: skip
    g = "fault: during a run"
    cases += [
        Case(g, ["threads.py"], [script("threads.py", TWO_THREADS)], expect="script", exit_code=0,
             writes_nothing=False,
             check=says("refused: another thread is in a call", "played on", "copy refused:")),
        Case(g, ["train", "ppo", ENV, "--backend", "subprocess", "--n-envs", "2", "--set", "n_steps=32",
                 "--set", "batch_size=32", "--checkpoint-every", "64", "--timesteps", "1e6",
                 "--run-dir", "run"],
             expect="clean", writes_nothing=False, exit_code=2, send_signal="SIGKILL to an env worker",
             check=killed_worker_then_resumed()),
    ]  # fmt: skip
    return cases


# ------------------------------------------------------------------------------------------------------
# running and checking
# ------------------------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: folders by name, files by size, modification time and SHA-1."""
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = ("dir",)
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            digest = ""
            if os.path.isfile(full) and os.access(full, os.R_OK):
                with open(full, "rb") as fh:
                    digest = hashlib.sha1(fh.read()).hexdigest()
            out[os.path.relpath(full, root)] = (st.st_size, st.st_mtime_ns, digest)
    return out


def _file_modes_bind() -> None:
    """In the child before exec: drop root's CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH from the bounding set,
    so a 0o555 folder is read-only for the command even when the sweep runs as root."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _make_writable(root: Path) -> None:
    for dirpath, dirs, _ in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(dirpath, name), 0o755)


@dataclasses.dataclass
class Result:
    case: Case
    problems: list[str]
    seconds: float
    stderr: str
    skipped: str = ""  # why the machine cannot produce the case's fault (e.g. no mount permission)


def run_case(case: Case, base: Path, index: int, keep: bool) -> Result:
    d = base / f"case-{index:03d}"
    d.mkdir()
    try:
        for setup in case.setup:
            setup(d)
    except CaseSkipped as exc:
        release_mounts(d)
        return Result(case, [], 0.0, "", skipped=str(exc))
    before = snapshot(d)
    preexec = _file_modes_bind if case.read_only_binds and os.geteuid() == 0 else None
    if case.preexec is not None:
        preexec = _chained(preexec, case.preexec)
    t0 = time.monotonic()
    problems: list[str] = []
    try:
        live = case.send_signal is not None or bool(case.closed)
        if live:
            code, stdout, stderr, checkpoints = run_live(case, d, preexec)
        elif case.close_stdout:
            proc = subprocess.Popen(
                [RETROKIT, *case.argv], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=CHILD_ENV, preexec_fn=preexec,
            )  # fmt: skip
            proc.stdout.readline()
            proc.stdout.close()  # the reader goes away, as `retrokit list | head -1` does
            stderr = proc.stderr.read().decode(errors="replace")
            code = proc.wait(timeout=TIMEOUT_S)
            stdout = ""
        else:
            argv = (
                [sys.executable, __file__, "--api-child", *case.argv]
                if case.expect == "api"
                else [sys.executable, *case.argv]
                if case.expect == "script"
                else [RETROKIT, *case.argv]
            )
            child_env = {**CHILD_ENV, **(case.env or {})}
            child_env = {k: v for k, v in child_env.items() if v is not None}  # None: variable removed
            with open(case.stdout_to or os.devnull, "wb") as sink:
                res = subprocess.run(
                    argv, cwd=d, stdout=sink if case.stdout_to else subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, errors="replace", env=child_env,
                    timeout=API_TIMEOUT_S if case.expect in ("api", "script") else TIMEOUT_S,
                    preexec_fn=preexec,
                )  # fmt: skip
            code, stdout, stderr = res.returncode, res.stdout or "", res.stderr
    except subprocess.TimeoutExpired:
        release_mounts(d)
        _make_writable(d)
        limit = API_TIMEOUT_S if case.expect in ("api", "script") else TIMEOUT_S
        return Result(case, [f"timed out after {limit} s"], time.monotonic() - t0, "")
    seconds = time.monotonic() - t0
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
    problems += live_problems(case, code, lines, stdout + stderr, checkpoints if live else [], d)
    writable_mounts(d)
    _make_writable(d)
    if case.writes_nothing:
        after = snapshot(d)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if changed:
            problems.append(f"changed: {', '.join(changed[:4])}{' ...' if len(changed) > 4 else ''}")
    release_mounts(d)
    if not keep:
        shutil.rmtree(d, ignore_errors=True)
    return Result(case, problems, seconds, stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="cases run at the same time (default 2)")
    parser.add_argument("--only", default=None, help="only cases whose label contains this text")
    parser.add_argument("--keep", action="store_true", help="keep the case folders (printed at the end)")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    args = parser.parse_args()
    if not os.path.exists(RETROKIT):
        sys.exit(f"{RETROKIT} not found: run this with the Python of the env that has retro-atari-kit")
    base = Path(tempfile.mkdtemp(prefix="retrokit-sweep-"))
    try:
        t0 = time.monotonic()
        FIXTURE.update(run="(fixture)", missing_rom="RetroKit/<missing ROM>-Nes-v0")
        cases = [c for c in all_cases() if args.only is None or args.only in c.label]
        if not args.list and any(c.expect != "api" for c in cases):  # the API cases need no trained run
            build_fixture(base)
            cases = [c for c in all_cases() if args.only is None or args.only in c.label]
        if args.list:
            for c in cases:
                print(c.label)
            print(f"{len(cases)} cases")
            return 0
        built = time.monotonic() - t0
        print(f"{len(cases)} cases, {args.jobs} at a time (fixture run built in {built:.0f} s)")
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda ic: run_case(ic[1], base, ic[0], args.keep), enumerate(cases)))
        failed = [r for r in results if r.problems]
        skipped = [r for r in results if r.skipped]
        for r in skipped:
            print(f"skipped: {r.case.label}\n    why: {r.skipped}")
        if failed:
            print("\nFAILED CASES")
            for r in failed:
                print(f"- {r.case.label}\n    problems: {'; '.join(r.problems)}")
                tail = r.stderr.strip().splitlines()[-3:]
                for line in tail:
                    print(f"    stderr: {line[:200]}")
        by_group: dict[str, list[int]] = {}
        for r in results:
            counts = by_group.setdefault(r.case.group, [0, 0])
            counts[0] += 1
            counts[1] += bool(r.problems)
        print("\ngroup                          cases  failed")
        for group, (n, bad) in by_group.items():
            print(f"{group:<30} {n:>5}  {bad:>6}")
        print(
            f"\n{len(results)} cases, {len(results) - len(failed) - len(skipped)} passed, "
            f"{len(failed)} failed, {len(skipped)} skipped ({time.monotonic() - t0:.0f} s)"
        )
        if args.keep:
            print(f"case folders kept in {base}")
        return 1 if failed else 0
    finally:
        if not args.keep:
            _make_writable(base)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--api-child"]:
        sys.exit(api_child(*sys.argv[2:]))
    sys.exit(main())
