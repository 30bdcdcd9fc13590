"""``retrokit report RUN_OR_EVAL_DIR... --out DIR``: per-game and aggregate scores with confidence intervals
(rliable), performance profiles, sample-efficiency curves, probability of improvement; markdown + CSVs."""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shlex
import sys
from typing import Any

from retro_atari_kit.cli._common import CliError, user_errors
from retro_atari_kit.cli.arguments import positive_int
from retro_atari_kit.csv_cells import csv_row


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="scores over runs and games with confidence intervals -> markdown, CSVs, plots",
        description="Read eval records (`retrokit eval ... --out DIR`) and run dirs; write per-game and "
        "aggregate scores (raw and human-normalised; IQM, median, mean, optimality gap with 95%% "
        "stratified bootstrap CIs from rliable), a performance profile, sample-efficiency curves from the "
        "monitor CSVs and, with two or more --group, the probability of improvement. docs/evaluation.md.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="RUN_OR_EVAL_DIR",
        help="eval record files, folders of them (and their subfolders), or run dirs (curves; records in "
        "their eval/)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write report.md, CSVs and PNGs to")
    p.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="NAME=PATTERN[,PATTERN]",
        help="name the runs whose name (or model path) matches a shell pattern, repeatable; two or more "
        "groups give the probability of improvement (default: agents are algorithm + network)",
    )
    p.add_argument(
        "--games",
        default=None,
        metavar="SET|GAME,GAME",
        help="only these games: a named set (atari5) or a comma-separated list (default: all)",
    )
    p.add_argument(
        "--reps",
        type=positive_int,
        default=10_000,
        help="bootstrap resamples of the aggregate CIs (default: %(default)s)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default: %(default)s)")
    p.set_defaults(func=run)


def parse_groups(values: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for value in values:
        name, sep, patterns = value.partition("=")
        if not sep or not name.strip() or not patterns.strip():
            raise CliError(f"--group {value!r}: use NAME=PATTERN[,PATTERN], e.g. --group PPO='pong-ppo-*'")
        if name.strip() in groups:
            raise CliError(
                f"--group {name.strip()!r} given twice; give each group once, patterns comma-separated"
            )
        groups[name.strip()] = [p.strip() for p in patterns.split(",") if p.strip()]
    return groups


def parse_games(value: str | None) -> set[str] | None:
    from retro_atari_kit.evaluation.scores import GAME_SETS

    if value is None:
        return None
    if value.lower() in GAME_SETS:
        return set(GAME_SETS[value.lower()])
    games = {g.strip() for g in value.split(",") if g.strip()}
    if not games:
        raise CliError(f"--games {value!r}: name a set ({', '.join(GAME_SETS)}) or games, e.g. Pong,Breakout")
    return games


def gather(inputs: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """(eval records, run dirs) of the inputs; CliError for a path that does not exist."""
    from retro_atari_kit.evaluation.records import read_records

    records, runs = [], []
    for path in inputs:
        if not os.path.exists(path):
            raise CliError(f"{path}: no such run dir, eval folder or eval record")
        records += read_records(path)
        if os.path.isdir(path):
            if os.path.isfile(os.path.join(path, "config.yaml")):
                runs.append(path)
            else:  # a folder of eval folders (results/evaluation/<protocol>/)
                for sub in sorted(os.listdir(path)):
                    if os.path.isdir(os.path.join(path, sub)) and sub != "eval":
                        records += read_records(os.path.join(path, sub))
    seen, unique = set(), []
    for r in records:  # an input given twice (a folder and its file) counts once
        if os.path.realpath(r["path"]) not in seen:
            seen.add(os.path.realpath(r["path"]))
            unique.append(r)
    return unique, runs


# a cell a spreadsheet evaluates starts with one of these (after spaces; see retro_atari_kit.csv_cells), or
# with a double quote, which a CSV reader takes as the start of a quoted cell
_AFTER_COMMA = re.compile(r",(?=[ ]*[=+\-@\t\r\n\"])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _shell_word(arg: str) -> str:
    """``arg`` quoted for a POSIX shell as :func:`shlex.quote` does, except that where a comma is followed by
    what would start a formula in a spreadsheet that splits the line at commas, the quote is closed and opened
    again (``'a,''=b'`` is the word ``a,=b``), and control characters are written as bash's ``$'\\n'``
    escapes: the same word for the shell, no formula and one line for a spreadsheet."""
    if _CONTROL.search(arg):
        body = "".join(
            f"\\x{ord(c):02x}" if _CONTROL.match(c) else "\\" + c if c in "\\'" else c for c in arg
        )
        return "$'" + _AFTER_COMMA.sub(",'$'", body) + "'"
    quoted = shlex.quote(arg)
    if not _AFTER_COMMA.search(arg):
        return quoted
    return "'" + _AFTER_COMMA.sub(",''", arg.replace("'", "'\"'\"'")) + "'"


def made_by(command: str) -> str:
    """The first line of every CSV of the report: ``# made by: <the command>`` (pandas: ``read_csv(path,
    comment="#")``), the command on one line and no cell of it a formula when a spreadsheet opens the file."""
    try:
        words = shlex.split(command)
    except ValueError:  # not a command line the CLI made (an API caller's free text)
        words = [command]
    return "# made by: " + " ".join(_shell_word(w) for w in words)


def csv_text(rows: list[dict[str, Any]], command: str) -> str:
    """CSV with the command that made it as a first ``#`` line; every cell through the kit's one rule for
    CSV cells (a name from a record or a ``--group`` is never a formula; numbers stay numbers)."""
    buf = io.StringIO()
    buf.write(made_by(command) + "\n")
    if rows:
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(csv_row(rows[0]))
        for row in rows:
            writer.writerow(
                csv_row(
                    f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v) for v in row.values()
                )
            )
    return buf.getvalue()


def write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# everything a report writes into its folder, and what an operating system may leave beside it: a folder
# holding anything else is not an earlier report, and replacing it would lose that
REPORT_FILES = frozenset(
    {
        "report.md",
        "per_game.csv",
        "aggregates.csv",
        "improvement.csv",
        "atari5.csv",
        "performance_profile.png",
        "sample_efficiency.png",
        ".DS_Store",
        "Thumbs.db",
        "desktop.ini",
    }
)
PNG_HEADROOM = len(os.sep + "performance_profile.png")  # the longest name made inside the folder


def report_folder(out: str) -> str:
    """The folder the report replaces or makes (``out``, or the folder a link ``out`` leads to), checked
    before any record is read: not a file, not the current folder or one above it, no files of others in it,
    and its parent folder takes the new report (name lengths, permissions, a disk). CliError otherwise."""
    from retro_atari_kit.files import check_creatable, os_error_message

    if os.path.islink(out) and not os.path.exists(out):
        raise CliError(
            f"--out {out}: a link to {os.readlink(out)}, which does not exist; pass another folder"
        )
    path = os.path.realpath(out) if os.path.islink(out) else out
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"--out {out}: not a folder; pass a folder for the report")
    here = os.path.realpath(os.getcwd())
    if os.path.isdir(path) and (here + os.sep).startswith(os.path.realpath(path).rstrip(os.sep) + os.sep):
        raise CliError(f"--out {out}: the current folder or one above it; pass a folder for the report")
    if os.path.isdir(path):
        try:
            others = sorted(set(os.listdir(path)) - REPORT_FILES)
        except OSError as exc:
            raise CliError(os_error_message(exc, "--out", flag="--out")) from None
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise CliError(
                f"--out {out}: holds files that are not a report's ({shown}); a report replaces its folder "
                "whole: pass a new folder (or an earlier report's)"
            )
    try:  # a name too long, /proc, a read-only folder: said before the records are read
        check_creatable(path, headroom=PNG_HEADROOM)
    except OSError as exc:
        raise CliError(os_error_message(exc, "--out", flag="--out")) from None
    return path


def run_entries(
    run_dirs: list[str], groups: dict[str, list[str]], games: set[str] | None, notes: list[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The sample-efficiency entries of the run dirs with a finished game (of ``games``), and a reason for
    each run dir left out; a damaged monitor CSV adds a note, as in ``retrokit plot``."""
    from retro_atari_kit.errors import RunError
    from retro_atari_kit.evaluation.plots import run_entry
    from retro_atari_kit.evaluation.records import trained_on
    from retro_atari_kit.evaluation.report import label_of
    from retro_atari_kit.runs import load_config

    entries, left_out = [], []
    for d in run_dirs:
        config = load_config(d)
        # labelled as its eval records are
        label = label_of(
            {**config, **trained_on(config), "run": os.path.basename(os.path.normpath(d))}, groups
        )
        try:
            entry = run_entry(d, label, warnings=notes)
        except RunError as exc:
            left_out.append(str(exc))
            continue
        if games is not None and entry["game"] not in games:
            continue
        if entry["monitor"]["r"].size == 0:
            left_out.append(f"{d} has no finished game in its monitor CSVs yet")
            continue
        entries.append(entry)
    return entries, left_out


def nothing_to_report(games: set[str] | None, left_out: list[str]) -> CliError:
    """The one line for inputs that give no table and no curve: what is missing, and why."""
    if games:
        return CliError(
            f"nothing to report: no eval record or finished game of {', '.join(sorted(games))} (--games) in "
            "the inputs; pass records of those games, or another --games"
        )
    return CliError(
        f"nothing to report: {'; '.join(['no eval records', *left_out])}; train longer (a game must end), "
        "or evaluate with `retrokit eval RUN_DIR --out DIR` and pass DIR"
    )


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.evaluation import report as rep
    from retro_atari_kit.evaluation.markdown import report_markdown
    from retro_atari_kit.evaluation.plots import performance_profile_plot, sample_efficiency_plot
    from retro_atari_kit.files import atomic_write, os_error_message

    command = getattr(args, "command_line", "retrokit report")
    groups = parse_groups(args.group)
    games = parse_games(args.games)
    out = report_folder(args.out)
    notes: list[str] = []
    with user_errors():
        records, run_dirs = gather(args.inputs)
        if not records and not run_dirs:
            raise CliError(
                "no eval records or run dirs in the inputs; make records with "
                "`retrokit eval RUN_DIR --out DIR` and pass DIR"
            )
        if games is not None:
            records = [r for r in records if r["game"] in games]
        entries, left_out = run_entries(run_dirs, groups, games, notes)
        cs = rep.cells(records, groups)
        if not cs and not entries:
            raise nothing_to_report(games, left_out)
        notes += [f"{line}; left out of the sample-efficiency plot" for line in left_out]
        notes += rep.shared_name_notes(records)
        tables: dict[str, list[dict[str, Any]]] = {
            "per_game": rep.per_game_rows(cs, reps=min(args.reps, 2_000), seed=args.seed),
            "aggregates": rep.aggregate_rows(cs, reps=args.reps, seed=args.seed),
        }
        notes += rep.normalized_matrices(cs)[2] if cs else []
        if len(groups) >= 2:
            tables["improvement"], more = rep.improvement_rows(
                cs, groups, reps=min(args.reps, 2_000), seed=args.seed
            )
            notes += more
        elif groups:
            notes.append("one --group: the probability of improvement needs two or more")
        tables["atari5"] = rep.atari5_rows(cs)
        mats = rep.normalized_matrices(cs)[0] if cs else {}
        names: list[str] = []  # the files of the report, in the order they are written
        markdown: list[str] = []

        def write_report(folder: str) -> None:
            # into a temporary folder beside the target, renamed into place once whole: a report that fails
            # half way leaves no CSVs without their report.md, and an earlier report as it was
            os.makedirs(folder)
            figures = {}
            for name, rows in tables.items():
                if rows:
                    write_text(os.path.join(folder, f"{name}.csv"), csv_text(rows, command))
                    names.append(f"{name}.csv")
            if mats:
                figures["performance profile"] = performance_profile_plot(
                    mats, os.path.join(folder, "performance_profile.png"), seed=args.seed
                )
            if entries:
                figures["sample efficiency"] = sample_efficiency_plot(
                    entries,
                    os.path.join(folder, "sample_efficiency.png"),
                    reps=min(args.reps, 1_000),
                    seed=args.seed,
                )
            names.extend(os.path.basename(path) for path in figures.values())
            md = report_markdown(command, records, tables, figures, notes, args.reps, folder)
            write_text(os.path.join(folder, "report.md"), md)
            names.append("report.md")
            markdown.append(md)

        try:
            atomic_write(out, write_report)
        except OSError as exc:  # a full disk: no half report, an earlier one left as it was
            raise CliError(os_error_message(exc, "cannot write the report to", flag="--out")) from None
    for line in notes:
        print(f"retrokit: note: {line}", file=sys.stderr)
    print(markdown[0])
    for name in names:
        print(f"wrote {os.path.join(args.out, name)}", file=sys.stderr)
    return 0
