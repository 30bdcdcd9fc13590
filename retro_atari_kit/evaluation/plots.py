"""The figures of ``retrokit report`` (matplotlib, Agg): performance profiles of human-normalised scores
and sample-efficiency curves from the runs' monitor CSVs, both with rliable's bootstrap CIs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from retro_atari_kit.errors import RunError
from retro_atari_kit.evaluation.scores import game_of
from retro_atari_kit.files import atomic_write
from retro_atari_kit.runs import agent_steps, load_config, read_monitor_csvs

GRID_POINTS = 40
WINDOW = 100  # games in the trailing mean of a curve, as `retrokit plot` and the training logs


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: str) -> str:
    plt = _pyplot()
    try:
        fig.tight_layout()
        atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def performance_profile_plot(
    mats: Mapping[str, np.ndarray], out: str, reps: int = 2_000, seed: int = 0, title: str | None = None
) -> str:
    """Fraction of (run, game) human-normalised scores above tau, with 95% CI bands, per agent."""
    from retro_atari_kit.evaluation.aggregate import performance_profiles

    if not mats or any(np.asarray(m).size == 0 for m in mats.values()):
        raise RunError("no human-normalised scores: no performance profile to draw")
    plt = _pyplot()
    top = max(1.5, max(float(np.max(m)) for m in mats.values()) * 1.05)
    taus = np.linspace(min(0.0, min(float(np.min(m)) for m in mats.values())), top, 121)
    profiles, cis = performance_profiles(mats, taus, reps=reps, seed=seed)
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    # one colour per agent, one line style per protocol: "agent [protocol]" keys
    agents = sorted({key.rsplit(" [", 1)[0] for key in mats})
    colors = plt.get_cmap("tab10" if len(agents) <= 10 else "tab20")
    styles = {"training": "-", "machado": "--", "nature": ":"}
    for key in mats:
        agent, _, protocol = key.rpartition(" [")
        agent = agent or key
        color = colors(agents.index(agent) % colors.N)
        label = f"{key} ({_count(mats[key].shape[0], 'run')} x {_count(mats[key].shape[1], 'game')})"
        ax.plot(
            taus, profiles[key], label=label, color=color, ls=styles.get(protocol.rstrip("]"), "-."), lw=1.6
        )
        ax.fill_between(taus, cis[key][0], cis[key][1], color=color, alpha=0.12)
    ax.axvline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xlabel(r"human-normalised score $\tau$ (1.0 = human)")
    ax.set_ylabel(r"fraction of runs with score > $\tau$")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(title or "performance profiles (95% stratified bootstrap CIs)", fontsize=10)
    return _save(fig, out)


def _trailing_mean(r: np.ndarray, window: int) -> np.ndarray:
    c = np.cumsum(np.insert(r.astype(np.float64), 0, 0.0))
    idx = np.arange(1, r.size + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def curves_by_game(runs: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]]:
    """``{game: {agent: [(steps, trailing mean score), ...one per run]}}`` from runs given as dicts with
    ``game``, ``agent`` and ``monitor`` (what ``read_monitor_csvs`` returns)."""
    out: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]] = {}
    for run in runs:
        d = run["monitor"]
        if d["r"].size == 0:
            continue
        out.setdefault(run["game"], {}).setdefault(run["agent"], []).append(
            (agent_steps(d), _trailing_mean(d["r"], WINDOW))
        )
    return out


def sample_efficiency_plot(runs: list[dict[str, Any]], out: str, reps: int = 1_000, seed: int = 0) -> str:
    """One panel per game: the trailing 100-game mean true score against agent steps, per agent (algorithm
    and network), the IQM over its runs with a 95% stratified bootstrap band (no band for one run)."""
    from retro_atari_kit.evaluation.aggregate import iqm, rliable_modules, seeded

    library, _ = rliable_modules()
    games = curves_by_game(runs)
    if not games:  # matplotlib's own words for it would be "Number of columns must be ... not 0"
        raise RunError("no run has a finished game in its monitor CSVs: no sample-efficiency curve to draw")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(games), figsize=(5.5 * len(games), 4), squeeze=False)
    for ax, (game, agents) in zip(axes[0], sorted(games.items()), strict=True):
        for agent, curves in sorted(agents.items()):
            end = min(float(steps[-1]) for steps, _ in curves)
            grid = np.linspace(end / GRID_POINTS, end, GRID_POINTS)
            ys = np.stack([np.interp(grid, steps, y) for steps, y in curves])[:, None, :]  # (runs, 1, T)
            if len(curves) > 1:
                with seeded(seed):
                    points, cis = library.get_interval_estimates(
                        {agent: ys},
                        lambda x: np.array([iqm(x[..., t]) for t in range(x.shape[-1])]),
                        reps=reps,
                    )
                curve = points[agent]
            else:  # one run: its own curve, no interval to draw
                curve = ys[0, 0]
            (line,) = ax.plot(grid, curve, label=f"{agent} ({_count(len(curves), 'run')})")
            if len(curves) > 1:
                ax.fill_between(grid, cis[agent][0], cis[agent][1], color=line.get_color(), alpha=0.2)
        ends = [float(steps[-1]) for curves in agents.values() for steps, _ in curves]
        log_x = max(ends) > 5 * min(ends)  # budgets far apart: a log axis keeps the short runs readable
        if log_x:
            ax.set_xscale("log")
        ax.set_title(f"{game}: IQM over runs of the last-{WINDOW}-game mean", fontsize=10)
        ax.set_xlabel("agent steps" + (" (log scale)" if log_x else ""))
        ax.set_ylabel("true game score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, out)


def run_entry(run_dir: str, label: str, warnings: list[str] | None = None) -> dict[str, Any]:
    """A run dir as :func:`sample_efficiency_plot` takes it (its ``monitor`` may hold no game yet). RunError
    for one whose config or monitor CSVs cannot be read; ``warnings`` receives a line per damaged CSV."""
    config = load_config(run_dir)
    monitor = read_monitor_csvs(run_dir, warnings=warnings)
    return {
        "run": os.path.basename(os.path.normpath(run_dir)),
        "game": game_of(str(config.get("env_id", "?"))),
        "agent": label,
        "monitor": monitor,
    }
