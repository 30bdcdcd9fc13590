"""When the operating system says no (docs/cli.md, "When the operating system says no"): a name too long,
/proc, a read-only run dir or disk, a full disk, a folder where a file is expected, a link to nothing, an
ASCII locale; for every command that reads or writes paths. Each gives one line and exit 2 (or works, where
nothing is wrong for it), and nothing saved before is lost or rewritten. Mounts (tmpfs, read-only binds) need
root: without it those cases are skipped, saying so (``mounted`` of tests/cli/_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli._run import fill
from tests.sweep._checks import absent, all_of, error_line, kept, made, no_leftovers, trained_to
from tests.sweep._setups import (
    Setup,
    folder,
    named,
    read_only,
    read_only_mount,
    replace_with,
    run_copy,
    text,
    tmpfs,
)
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


TINY_TRAIN = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": ""}  # Python's UTF-8 mode follows (PEP 540)
PURE_ASCII = {**ASCII, "PYTHONUTF8": "0"}  # no UTF-8 mode: the file system encoding is ASCII


# the same command in tests/cli/test_os_errors.py, there with the message's words: that test is kept
LONG = "a" * 300
NEW = "--timesteps 64 --n-envs 1 --set n_steps=32 --set batch_size=32"
RUN_DIR = "test_a_run_dir_the_os_refuses_is_one_line_and_nothing_is_made"
RECORD_OUT = "test_record_refuses_an_out_the_os_refuses_before_a_game_is_played"
PLOT_LONG = "test_plot_refuses_a_name_too_long_and_takes_a_long_one_that_fits"
RO_MOUNT = "test_resume_of_a_run_on_a_read_only_mount_is_one_line_and_changes_nothing"
OLDER = "test_a_full_disk_leaves_the_older_file_of_that_name_as_it_was"
FULL = "[tmpfs disk; file disk/old.gif; file disk/old.png; filled]"
KIND = "test_resume_refuses_a_run_dir_entry_of_the_wrong_kind_before_writing"
LOCALE = "test_a_name_the_locale_cannot_hold_is_one_line"
RESUME = "retrokit train --resume run --timesteps 128"
MODES = "test_resume_of_a_run_without_write_permission_is_one_line_and_changes_nothing"
KEPT = "test_a_full_disk_while_training_keeps_the_checkpoints_and_says_how_to_go_on"
DANGLING = "test_export_names_a_monitor_log_that_links_to_nothing_and_leaves_no_half_export"
GLYPHS = "test_glyphs_the_font_lacks_are_one_warning_under_an_ascii_locale"
IN_TESTS_CLI = {
    f"retrokit train ppo {ENV} --run-dir runs/{LONG}/x {NEW}": RUN_DIR,
    f"retrokit train ppo {ENV} --run-dir /proc/x {NEW}": RUN_DIR,
    f"retrokit record run --out {LONG}.mp4": RECORD_OUT,
    "retrokit record run --out /proc/x.gif": RECORD_OUT,
    f"retrokit plot run --out {LONG}.png": PLOT_LONG,
    f"retrokit plot run --out {'b' * 246}.png": PLOT_LONG,
    f"retrokit export run {LONG}": "test_export_to_a_name_too_long_leaves_no_half_export",
    f"{RESUME} [run mounted read-only]": RO_MOUNT,
    "retrokit eval run --episodes 1 [run mounted read-only]": RO_MOUNT,
    f"{RESUME} [run read-only]": MODES,
    "retrokit train --resume disk/run --timesteps 128 [tmpfs disk]": KEPT,
    f"retrokit record run --out disk/old.gif --max-steps 40 {FULL}": OLDER,
    f"retrokit plot run --out disk/old.png {FULL}": OLDER,
    "retrokit list": "test_output_to_a_full_disk_is_one_line",
    "retrokit eval run --episodes 1 [run/config.yaml a folder]": "test_config_yaml_that_is_a_folder_is_named",
    f"{RESUME} [run/log.txt a folder]": KIND,
    f"{RESUME} [run/checkpoints a file]": KIND,
    f"{RESUME} [run/checkpoints a link]": KIND,
    "retrokit export run out [run/monitor/9.monitor.csv a link]": DANGLING,
    "retrokit plot runs/pöng-ü --title Pöng 乒乓 [a run copied as runs/pöng-ü]": GLYPHS,
    "retrokit train --resume runs/pöng-ü --timesteps 96 [a run copied as runs/pöng-ü]": LOCALE,
    "retrokit plot runs/pöng-ü [a run copied as runs/pöng-ü]": LOCALE,
    "retrokit train --resume r\udcf6n --timesteps 96 [a run copied as r\udcf6n]": LOCALE,
    "retrokit plot r\udcf6n [a run copied as r\udcf6n]": LOCALE,
}


def unreadable(name: str) -> Setup:
    def setup(d: Path) -> None:
        (d / name).chmod(0)

    return named(f"{name} mode 0", setup)


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
    deep = "/".join(["p" * 200] * 21)  # every name fits; the path is past PATH_MAX (4096 bytes)
    add(g, "train", "ppo", ENV, "--run-dir", deep, *new, needles=("path is longer than the OS takes",))
    add(g, "plot", "run", "--out", f"{deep}.png", setup=good, needles=("does not exist",))  # makes no folders
    add(g, "export", "run", deep, setup=good, needles=("does not exist",))
    add(g, "list", long)
    add(g, "import-roms", long)
    fits = f"{'b' * 246}.png"  # 250 bytes: fits, though its temporary's name would not without shortening
    add(g, "plot", "run", "--out", fits, setup=good, writes_nothing=False, check=made(fits), **works)

    g = "permission denied on reading"  # root ignores file modes: the command runs without that power
    for name, argv in (
        ("run/model.zip", ["eval", "run", "--episodes", "1"]),
        ("run/model.zip", ["export", "run", "out"]),
        ("run/checkpoints", ["train", "--resume", "run", "--timesteps", "128"]),
        ("run/checkpoints/model_64_steps.zip", ["train", "--resume", "run", "--timesteps", "128"]),
        ("run/config.yaml", ["eval", "run", "--episodes", "1"]),
    ):
        add(
            g,
            *argv,
            setup=[run_copy(), unreadable(name)],
            read_only_binds=True,
            needles=("Permission denied",),
        )

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
            text("disk/old.png", "an older plot\n"), named("filled", lambda d: fill(d / "disk"))]  # fmt: skip
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


@pytest.mark.parametrize("case", params(ci_first(without(os_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
