"""The tables of ``retrokit report``: eval records grouped by agent and protocol, per game and aggregated
(raw and human-normalised), probability of improvement between named groups, the Atari-5 estimate.

An *agent* is a label for runs that belong together: by default algorithm and network (``PPO impala``,
``PPO nature (RLlib)``), or a name given with ``groups`` (``{"A": ["pong-ppo-*"]}``, run names matched
with shell patterns). A *run* contributes one number per game and protocol: the mean true score of its
evaluation games. Plots are in :mod:`retro_atari_kit.evaluation.plots`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retro_atari_kit.evaluation.scores import ATARI5, atari5_median_estimate, human_normalized


@dataclass
class Cell:
    """The runs of one agent on one game under one protocol."""

    agent: str
    protocol: str
    game: str
    runs: list[str] = field(default_factory=list)
    means: list[float] = field(default_factory=list)  # one per run: its mean evaluation score
    scores: list[float] = field(default_factory=list)  # every evaluation game of every run
    episodes: int = 0


def default_label(record: Mapping[str, Any]) -> str:
    """``PPO impala``; ``PPO nature (RLlib)`` for RLlib runs; ``PPO impala, trained machado`` for a run
    trained under another protocol than ``training``, ``PPO impala, trained sticky`` for one trained with
    sticky actions of its own (``--env-kwarg sticky_actions=...``); the run name where the record has no
    algo. Agents trained on different play are never pooled under one label."""
    algo = record.get("algo")
    if not algo:
        return str(record.get("run", "?"))
    label = f"{str(algo).upper()} {record.get('network') or ''}".strip()
    label += " (RLlib)" if record.get("engine") == "rllib" else ""
    trained = record.get("train_protocol")
    if trained and trained != "training":
        return f"{label}, trained {trained}"
    sticky = (record.get("train_env_kwargs") or {}).get("sticky_actions") or 0
    return f"{label}, trained sticky" if sticky else label


def label_of(record: Mapping[str, Any], groups: Mapping[str, list[str]] | None) -> str:
    """The record's group name (the first group one of whose patterns matches its run name or model path),
    else :func:`default_label`."""
    for name, patterns in (groups or {}).items():
        for pattern in patterns:
            if fnmatch.fnmatch(str(record.get("run", "")), pattern) or fnmatch.fnmatch(
                str(record.get("model", "")), pattern
            ):
                return name
    return default_label(record)


def cells(records: Iterable[Mapping[str, Any]], groups: Mapping[str, list[str]] | None = None) -> list[Cell]:
    """Records grouped into (agent, protocol, game) cells, sorted; a run evaluated twice under one
    protocol (two records) counts once, its newest record."""
    newest: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for r in records:
        key = (label_of(r, groups), r["protocol"]["protocol"], str(r.get("run")) + "|" + str(r.get("game")))
        if key not in newest or str(r.get("created", "")) >= str(newest[key].get("created", "")):
            newest[key] = r
    by_cell: dict[tuple[str, str, str], Cell] = {}
    for (agent, protocol, _), r in sorted(newest.items(), key=lambda kv: (kv[0], str(kv[1].get("run")))):
        c = by_cell.setdefault((agent, protocol, r["game"]), Cell(agent, protocol, r["game"]))
        c.runs.append(str(r.get("run")))
        c.means.append(float(np.mean(r["scores"])))
        c.scores += [float(x) for x in r["scores"]]
        c.episodes += len(r["scores"])
    return [by_cell[k] for k in sorted(by_cell)]


def shared_name_notes(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """A note for each run name that stands for records of different model files on one game under one
    protocol (``a/run`` and ``b/run``, evaluated into two folders): :func:`cells` counts a run name once,
    its newest record, so the others are left out, and the report says which."""
    by: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        by.setdefault((str(r["run"]), str(r["game"]), str(r["protocol"]["protocol"])), []).append(r)
    notes = []
    for (run, game, protocol), group in sorted(by.items()):
        if len({str(r.get("model")) for r in group}) > 1:
            files = ", ".join(str(r.get("path")) for r in group)
            notes.append(
                f"run {run!r} on {game} [{protocol}]: {len(group)} records of different model files "
                f"({files}) share the run name; the newest counts, the others are left out: give the runs "
                "distinct names"
            )
    return notes


def matrix(cs: list[Cell], games: list[str], normalize: bool = False) -> tuple[np.ndarray, list[str]]:
    """``(runs, games)`` matrix of one agent and protocol for ``games`` (raw or human-normalised), and notes.

    rliable needs the same number of runs on every game: with more runs on some games than on others, the
    first ``min`` runs of each game (by run name) are used, and a note says so."""
    by_game = {c.game: c for c in cs}
    counts = [len(by_game[g].means) for g in games]
    n = min(counts)
    notes = []
    if len(set(counts)) > 1:
        notes.append(
            f"runs per game differ ({dict(zip(games, counts, strict=True))}): the first {n} of each used"
        )
    cols = []
    for g in games:
        values = by_game[g].means[:n]
        cols.append([human_normalized(g, v) if normalize else v for v in values])
    return np.asarray(cols, dtype=np.float64).T, notes


def per_game_rows(cs: list[Cell], reps: int, seed: int) -> list[dict[str, Any]]:
    """One row per cell: runs, episodes, mean of run means, IQM over runs with its 95% CI (training-run
    variation: needs several runs), the 95% bootstrap CI of the mean over the evaluation games of all runs
    pooled (evaluation variation: what a single run can say), human-normalised mean (None without a
    reference)."""
    from retro_atari_kit.evaluation.aggregate import aggregate_with_ci

    rows = []
    for c in cs:
        iqm = aggregate_with_ci({"x": np.asarray(c.means)[:, None]}, reps=reps, seed=seed)["x"]["IQM"]
        games = aggregate_with_ci({"x": np.asarray(c.scores)[:, None]}, reps=reps, seed=seed)["x"]["mean"]
        mean = float(np.mean(c.means))
        rows.append(
            {
                "agent": c.agent,
                "protocol": c.protocol,
                "game": c.game,
                "runs": len(c.means),
                "episodes": c.episodes,
                "mean": mean,
                "iqm": iqm[0],
                "iqm_low": iqm[1],
                "iqm_high": iqm[2],
                "games_mean_low": games[1],
                "games_mean_high": games[2],
                "human_normalized": human_normalized(c.game, mean),
            }
        )
    return rows


def agent_protocols(cs: list[Cell]) -> dict[tuple[str, str], list[Cell]]:
    out: dict[tuple[str, str], list[Cell]] = {}
    for c in cs:
        out.setdefault((c.agent, c.protocol), []).append(c)
    return out


def normalized_matrices(cs: list[Cell]) -> tuple[dict[str, np.ndarray], dict[str, list[str]], list[str]]:
    """Human-normalised ``(runs, games)`` matrices per ``"agent [protocol]"`` over the games that have a
    reference, their games, and notes."""
    mats, games_of, notes = {}, {}, []
    for (agent, protocol), group in agent_protocols(cs).items():
        games = [c.game for c in group if human_normalized(c.game, 0.0) is not None]
        if not games:
            continue
        key = f"{agent} [{protocol}]"
        mats[key], n = matrix(group, games, normalize=True)
        games_of[key] = games
        notes += [f"{key}: {line}" for line in n]
    return mats, games_of, notes


def aggregate_rows(cs: list[Cell], reps: int, seed: int) -> list[dict[str, Any]]:
    """IQM, median, mean and optimality gap of the human-normalised scores per agent and protocol, with
    95% stratified bootstrap CIs."""
    from retro_atari_kit.evaluation.aggregate import aggregate_with_ci

    mats, games_of, _ = normalized_matrices(cs)
    if not mats:
        return []
    result = aggregate_with_ci(mats, reps=reps, seed=seed)
    rows = []
    for key, metrics in result.items():
        agent, protocol = key.rsplit(" [", 1)
        for metric, (point, low, high) in metrics.items():
            rows.append(
                {
                    "agent": agent,
                    "protocol": protocol.rstrip("]"),
                    "games": " ".join(games_of[key]),
                    "runs": mats[key].shape[0],
                    "metric": metric,
                    "value": point,
                    "low": low,
                    "high": high,
                }
            )
    return rows


def improvement_rows(
    cs: list[Cell], groups: Mapping[str, list[str]], reps: int, seed: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """P(X > Y) for every pair of named groups (in the order given), per protocol, over the games both
    played (raw scores: the probability is the same under any per-game affine normalisation)."""
    from retro_atari_kit.evaluation.aggregate import probability_of_improvement

    by = agent_protocols(cs)
    names = list(groups)
    rows, notes = [], []
    protocols = sorted({p for _, p in by})
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            for protocol in protocols:
                gx, gy = by.get((x, protocol)), by.get((y, protocol))
                if not gx or not gy:
                    continue
                common = sorted({c.game for c in gx} & {c.game for c in gy})
                if not common:
                    notes.append(
                        f"{x} and {y} [{protocol}]: no game in common, no probability of improvement"
                    )
                    continue
                mx, nx = matrix(gx, common)
                my, ny = matrix(gy, common)
                notes += nx + ny
                p, low, high = probability_of_improvement(mx, my, reps=reps, seed=seed)
                rows.append(
                    {
                        "x": x,
                        "y": y,
                        "protocol": protocol,
                        "games": " ".join(common),
                        "runs_x": mx.shape[0],
                        "runs_y": my.shape[0],
                        "p_x_better": p,
                        "low": low,
                        "high": high,
                    }
                )
    return rows, notes


def atari5_rows(cs: list[Cell]) -> list[dict[str, Any]]:
    """Atari-5's estimate of the 57-game median human-normalised score, for each agent and protocol with
    all five games (each game's mean over runs)."""
    rows = []
    for (agent, protocol), group in agent_protocols(cs).items():
        means = {c.game: float(np.mean(c.means)) for c in group}
        if all(g in means for g in ATARI5):
            rows.append(
                {"agent": agent, "protocol": protocol, "median57_estimate": atari5_median_estimate(means)}
            )
    return rows
