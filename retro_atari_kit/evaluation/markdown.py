"""The markdown of ``retrokit report``: the command, the protocols as the records state them, and the
tables of :mod:`retro_atari_kit.evaluation.report`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from retro_atari_kit.evaluation.scores import ATARI5, ATARI5_RELATIVE_ERROR


def _f(x: Any, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _ci(point: float, low: float, high: float, digits: int = 3) -> str:
    return f"{point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _line(text: str) -> str:
    """``text`` on one line: a name from a record cannot start a heading, a list or a table of its own."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _code(text: str) -> str:
    """``text`` as inline code, fenced with more backticks than it holds in a row."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {_line(text)} {fence}" if longest else f"`{_line(text)}`"


def _cell(text: str) -> str:
    """``text`` as a table cell: on one line, its ``|`` escaped so that it cannot split the row."""
    return _line(text).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(_cell(c) for c in r) + " |" for r in rows),
    ]


def protocol_lines(records: list[Mapping[str, Any]]) -> list[str]:
    """One row per protocol found in the records: what it set (from the records themselves)."""
    seen: dict[str, Mapping[str, Any]] = {}
    for r in records:
        seen.setdefault(r["protocol"]["protocol"], r["protocol"])
    rows = []
    for name, p in sorted(seen.items()):
        kwargs = json.dumps(p.get("env_kwargs", {}), sort_keys=True) if p.get("env_kwargs") else "the run's"
        eps = p.get("epsilon_value_based")
        rows.append([name, _code(kwargs), str(p.get("frame_cap")), "n/a" if eps is None else f"{eps:g}"])
    return _table(["protocol", "env kwargs set over the run's", "frame cap", "epsilon (DQN, QR-DQN)"], rows)


def report_markdown(
    command: str,
    records: list[Mapping[str, Any]],
    tables: Mapping[str, list[dict[str, Any]]],
    figures: Mapping[str, str],
    notes: list[str],
    reps: int,
    out_dir: str,
) -> str:
    lines = [
        "# Evaluation report",
        "",
        f"Made by {_code(command)} ({len(records)} eval records). Scores are true game scores (whole games, "
        "unclipped). Human-normalised: (score - random) / (human - random), references from `atarihns`; "
        "1.0 = human. CIs: 95% stratified bootstrap over runs (rliable).",
        "",
    ]
    if records:
        lines += ["## Protocols", "", *protocol_lines(records), ""]
        lines += ["## Records", ""]
        rows = [
            [
                str(r.get("run")),
                r["protocol"]["protocol"],
                str(r.get("game")),
                str(r.get("steps")),
                str(len(r["scores"])),
                "epsilon-greedy" if "epsilon" in r else ("arg-max" if r.get("deterministic") else "sampled"),
                _code(str(r.get("command"))),
            ]
            for r in records
        ]
        lines += [
            *_table(["run", "protocol", "game", "agent steps", "games", "actions", "command"], rows),
            "",
        ]
    per_game = tables.get("per_game") or []
    if per_game:
        lines += [
            "## Per game",
            "",
            "Raw true scores. mean: over runs of each run's mean score; IQM over runs with its 95% CI (the "
            "variation between training runs: a point for one run); games CI: the 95% bootstrap CI of the "
            "mean over all evaluation games (the variation between games of the same agents).",
            "",
        ]
        rows = [
            [
                r["agent"],
                r["protocol"],
                r["game"],
                str(r["runs"]),
                str(r["episodes"]),
                _f(r["mean"]),
                _ci(r["iqm"], r["iqm_low"], r["iqm_high"], 2),
                f"[{r['games_mean_low']:.2f}, {r['games_mean_high']:.2f}]",
                _f(r["human_normalized"], 3),
            ]
            for r in per_game
        ]
        header = [
            "agent",
            "protocol",
            "game",
            "runs",
            "games",
            "mean",
            "IQM [95% CI]",
            "games CI",
            "human-normalised",
        ]
        lines += [*_table(header, rows), ""]
    agg = tables.get("aggregates") or []
    if agg:
        lines += [
            "## Aggregates (human-normalised)",
            "",
            f"Over runs and games with a reference; {reps} bootstrap resamples. Optimality gap: the mean "
            "shortfall below human level (1.0), lower is better.",
            "",
        ]
        by: dict[tuple[str, str], dict[str, Any]] = {}
        for r in agg:
            by.setdefault((r["agent"], r["protocol"]), {"games": r["games"], "runs": r["runs"]})[
                r["metric"]
            ] = r
        rows = [
            [a, p, v["games"], str(v["runs"])]
            + [
                _ci(v[m]["value"], v[m]["low"], v[m]["high"])
                for m in ("IQM", "median", "mean", "optimality_gap")
            ]
            for (a, p), v in sorted(by.items())
        ]
        header = ["agent", "protocol", "games", "runs", "IQM", "median", "mean", "optimality gap"]
        lines += [*_table(header, rows), ""]
    poi = tables.get("improvement") or []
    if poi:
        lines += [
            "## Probability of improvement",
            "",
            "P(X > Y): a run of X beats a run of Y on a random game.",
            "",
        ]
        rows = [
            [
                r["x"],
                r["y"],
                r["protocol"],
                r["games"],
                f"{r['runs_x']} / {r['runs_y']}",
                _ci(r["p_x_better"], r["low"], r["high"]),
            ]
            for r in poi
        ]
        lines += [*_table(["X", "Y", "protocol", "games", "runs X / Y", "P(X > Y) [95% CI]"], rows), ""]
    a5 = tables.get("atari5") or []
    lines += ["## Atari-5", ""]
    if a5:
        lines += [
            f"Estimate of the 57-game median human-normalised score from {', '.join(ATARI5)} (Aitchison et "
            f"al. 2023; relative error about {ATARI5_RELATIVE_ERROR:.0%}).",
            "",
            *_table(
                ["agent", "protocol", "57-game median estimate"],
                [[r["agent"], r["protocol"], _f(r["median57_estimate"], 3)] for r in a5],
            ),
            "",
        ]
    else:
        lines += [f"No agent has records of all five Atari-5 games ({', '.join(ATARI5)}): no estimate.", ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{name}]({os.path.relpath(path, out_dir)})" for name, path in figures.items()] + [""]
    if notes:
        lines += ["## Notes", "", *(f"- {_line(n)}" for n in notes), ""]
    return "\n".join(lines)
