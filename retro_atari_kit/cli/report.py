"""``retrokit report RUN_OR_EVAL_DIR... --out DIR``: per-game and aggregate scores with confidence intervals
(rliable), performance profiles, sample-efficiency curves, probability of improvement; markdown + CSVs."""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from typing import Any

from retro_atari_kit.cli._common import CliError, user_errors
from retro_atari_kit.cli.arguments import positive_int
from retro_atari_kit.files import atomic_write


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


def csv_text(rows: list[dict[str, Any]], command: str) -> str:
    """CSV with the command that made it as a first ``#`` line (pandas: ``read_csv(path, comment="#")``)."""
    buf = io.StringIO()
    buf.write(f"# made by: {command}\n")
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    k: (f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v))
                    for k, v in row.items()
                }
            )
    return buf.getvalue()


def write_text(path: str, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_write(path, write)


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.evaluation import report as rep
    from retro_atari_kit.evaluation.markdown import report_markdown
    from retro_atari_kit.evaluation.plots import performance_profile_plot, run_entry, sample_efficiency_plot

    command = getattr(args, "command_line", "retrokit report")
    groups = parse_groups(args.group)
    games = parse_games(args.games)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise CliError(f"--out {args.out}: not a folder; pass a folder for the report")
    with user_errors():
        records, run_dirs = gather(args.inputs)
        if games is not None:
            records = [r for r in records if r.get("game") in games]
        if not records and not run_dirs:
            raise CliError(
                "no eval records or run dirs in the inputs; make records with "
                "`retrokit eval RUN_DIR --out DIR` and pass DIR"
            )
        os.makedirs(args.out, exist_ok=True)
        cs = rep.cells(records, groups)
        tables: dict[str, list[dict[str, Any]]] = {
            "per_game": rep.per_game_rows(cs, reps=min(args.reps, 2_000), seed=args.seed),
            "aggregates": rep.aggregate_rows(cs, reps=args.reps, seed=args.seed),
        }
        notes = rep.normalized_matrices(cs)[2] if cs else []
        if len(groups) >= 2:
            tables["improvement"], more = rep.improvement_rows(
                cs, groups, reps=min(args.reps, 2_000), seed=args.seed
            )
            notes += more
        elif groups:
            notes.append("one --group: the probability of improvement needs two or more")
        tables["atari5"] = rep.atari5_rows(cs)
        written = []
        for name, rows in tables.items():
            if rows:
                path = os.path.join(args.out, f"{name}.csv")
                write_text(path, csv_text(rows, command))
                written.append(path)
        figures = {}
        mats = rep.normalized_matrices(cs)[0] if cs else {}
        if mats:
            figures["performance profile"] = performance_profile_plot(
                mats, os.path.join(args.out, "performance_profile.png"), seed=args.seed
            )
        entries = []
        for d in run_dirs:
            from retro_atari_kit.runs import load_config

            config = load_config(d)
            entry = run_entry(
                d, rep.label_of({**config, "run": os.path.basename(os.path.normpath(d))}, groups)
            )
            if entry is not None and (games is None or entry["game"] in games):
                entries.append(entry)
        if entries:
            figures["sample efficiency"] = sample_efficiency_plot(
                entries,
                os.path.join(args.out, "sample_efficiency.png"),
                reps=min(args.reps, 1_000),
                seed=args.seed,
            )
        md = report_markdown(command, records, tables, figures, notes, args.reps, args.out)
        md_path = os.path.join(args.out, "report.md")
        write_text(md_path, md)
    for line in notes:
        print(f"retrokit: note: {line}", file=sys.stderr)
    print(md)
    for path in [*written, *figures.values(), md_path]:
        print(f"wrote {path}", file=sys.stderr)
    return 0
