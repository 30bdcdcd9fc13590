"""``retrokit plot RUN_DIR...``: learning curves of the true score from the runs' monitor CSVs."""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings

import numpy as np

from retro_atari_kit.cli._common import CliError, user_errors
from retro_atari_kit.cli.arguments import positive_int
from retro_atari_kit.errors import check_output_path
from retro_atari_kit.files import check_creatable, os_error_message
from retro_atari_kit.runs import agent_steps, atomic_write, read_monitor_csvs

# matplotlib's warning for a character its font cannot draw (a CJK title with DejaVu Sans), one per glyph
_MISSING_GLYPH = re.compile(r"Glyph (\d+) .*missing from")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plot",
        help="learning curves (true score) of one or more runs -> PNG",
        description="Overlay the true-score curves of several runs; one column per "
        "smoothing window (moving average over episodes).",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run dirs (or exports) to overlay")
    p.add_argument(
        "--x",
        choices=["steps", "episodes", "time"],
        default="steps",
        help="x axis: agent steps, games or hours (default: %(default)s)",
    )
    p.add_argument(
        "--smooth",
        type=positive_int,
        nargs="+",
        default=[10, 100],
        metavar="N",
        help="moving-average windows in games, one column each; a window appears once a run has that many "
        "games (default: 10 100)",
    )
    p.add_argument("--out", default="curves.png", help="PNG file to write (default: %(default)s)")
    p.add_argument(
        "--title",
        default=None,
        help="figure title (default: the runs' env IDs and algorithms, from their config.yaml)",
    )
    p.set_defaults(func=run)


def moving_average(y: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` previous episodes (shorter at the start)."""
    c = np.cumsum(np.insert(y.astype(np.float64), 0, 0.0))
    idx = np.arange(1, y.size + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def default_title(run_dirs: list[str]) -> str | None:
    """``"RetroKit/Pong-v0: DQN"`` from the runs' ``config.yaml`` (env ID and algorithm; RLlib runs say so),
    runs of one env under one name (``"RetroKit/Pong-v0: PPO, DQN"``); None when no run has a readable
    config."""
    from retro_atari_kit.runs import load_config

    by_env: dict[str, list[str]] = {}
    for d in run_dirs:
        try:
            config = load_config(d)
        except ValueError:  # monitor CSVs without a config (copied by hand): no title from it
            continue
        algo = str(config.get("algo", "?")).upper() + (" (RLlib)" if config.get("engine") == "rllib" else "")
        algos = by_env.setdefault(str(config.get("env_id", "?")), [])
        if algo not in algos:
            algos.append(algo)
    return "; ".join(f"{env}: {', '.join(algos)}" for env, algos in by_env.items()) or None


def windows_shown(smooth: list[int], games: int) -> list[int]:
    """The smoothing windows that get a column: those the longest run has enough games for (a "last 100
    games" curve of 40 games is a "last 40"), at least the smallest one."""
    shown = [w for w in smooth if w <= games]
    return shown or [min(smooth)]


def _matplotlib_dirs() -> list[str]:
    """The folders matplotlib writes under HOME (its config, its font cache), as it finds them."""
    home = os.path.expanduser("~")
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return [os.path.join(config, "matplotlib"), os.path.join(cache, "matplotlib")]


def _usable(folder: str) -> bool:
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def use_writable_matplotlib_dir() -> None:
    """Point ``MPLCONFIGDIR`` at a folder of our own when matplotlib's under HOME cannot be written (a
    read-only HOME, HOME unset in a service): matplotlib would otherwise print two warnings per run. The
    folder is per user and kept (the font cache is built once), refused if someone else owns it."""
    if os.environ.get("MPLCONFIGDIR") or all(_usable(d) for d in _matplotlib_dirs()):
        return
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"retrokit-matplotlib-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
        if os.path.islink(folder) or st.st_uid != os.getuid() or not os.access(folder, os.W_OK):
            folder = tempfile.mkdtemp(prefix="retrokit-matplotlib-")
    except OSError:
        folder = tempfile.mkdtemp(prefix="retrokit-matplotlib-")
    os.environ["MPLCONFIGDIR"] = folder


def _drawable_title(title: str, notes: list[str] | None) -> str:
    """``title`` as given, or with its ``$`` escaped (drawn literally, one note) when matplotlib's mathtext
    cannot parse it: matplotlib would fail while saving, after the plot was made."""
    if title.count("$") - title.count("\\$") < 2:
        return title
    from matplotlib.mathtext import MathTextParser

    try:
        MathTextParser("path").parse(title)
    except ValueError as exc:
        why = next((line for line in reversed(str(exc).splitlines()) if line.strip()), "")
        if notes is not None:
            notes.append(f"--title {title!r} is not valid mathtext ({why.strip()}); drawn literally")
        return title.replace("\\$", "$").replace("$", "\\$")
    return title


def plot_runs(
    run_dirs: list[str],
    out: str,
    x: str = "steps",
    smooth: list[int] | None = None,
    title: str | None = None,
    notes: list[str] | None = None,
) -> str:
    """Write the PNG; returns its path. One column per window of ``smooth`` that the longest run has the
    games for (:func:`windows_shown`); ``title`` defaults to :func:`default_title`. Characters the font
    cannot draw (drawn as boxes) are named in one line appended to ``notes``, not one warning each."""
    use_writable_matplotlib_dir()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [(os.path.basename(os.path.normpath(d)), read_monitor_csvs(d)) for d in run_dirs]
    smooth = windows_shown(smooth or [10, 100], max(d["r"].size for _, d in data))
    title = title if title is not None else default_title(run_dirs)
    fig, axes = plt.subplots(1, len(smooth), figsize=(5.5 * len(smooth), 4), squeeze=False)
    for ax, w in zip(axes[0], smooth, strict=True):
        for label, d in data:
            if d["r"].size == 0:
                continue
            games = np.arange(1, d["r"].size + 1)
            xs = {"steps": agent_steps(d), "episodes": games, "time": d["t"] / 3600}[x]
            ax.plot(xs, moving_average(d["r"], w), label=f"{label} ({d['r'].size} games)")
        ax.set_title(f"true score, mean of last {w} games")
        ax.set_xlabel({"steps": "agent steps", "episodes": "games", "time": "hours"}[x])
        ax.set_ylabel("true game score")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(_drawable_title(title, notes))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.tight_layout()
            atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)
    missing = {chr(int(m.group(1))) for w in caught if (m := _MISSING_GLYPH.search(str(w.message)))}
    for w in caught:
        if not _MISSING_GLYPH.search(str(w.message)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing and notes is not None:
        notes.append(f"the font has no {''.join(sorted(missing))!r} (title or run names): drawn as boxes")
    return out


def run(args: argparse.Namespace) -> int:
    for d in args.run_dirs:
        if not os.path.isdir(d):
            raise CliError(f"{d}: no such run dir")
    if not args.out.lower().endswith(".png"):
        raise CliError(f"--out {args.out!r}: use a .png file name")
    notes: list[str] = []  # one line per damaged monitor CSV; damage never stops the plot
    with user_errors():
        check_output_path(args.out)
        try:  # a name too long, /proc, a read-only disk: said before the runs are read
            check_creatable(args.out)
        except OSError as exc:
            raise CliError(os_error_message(exc, "--out", flag="--out")) from None
        data = {d: read_monitor_csvs(d, warnings=notes) for d in args.run_dirs}
    for line in dict.fromkeys(notes):  # a run given twice: its files are named once
        print(f"retrokit: warning: {line}", file=sys.stderr)
    glyphs: list[str] = []
    try:
        out = plot_runs(args.run_dirs, args.out, x=args.x, smooth=args.smooth, title=args.title, notes=glyphs)
    except OSError as exc:  # a full disk: the old PNG, if any, is left as it was
        raise CliError(os_error_message(exc, "cannot write", flag="--out")) from None
    for line in glyphs:
        print(f"retrokit: warning: {line}", file=sys.stderr)
    for d, v in data.items():
        last = v["r"][-100:]
        mean = f"{last.mean():.2f}" if last.size else "n/a"
        print(
            f"{d}: {v['r'].size} games, {int(v['steps'][-1]) if v['r'].size else 0} steps, "
            f"mean of last {last.size}: {mean}"
        )
    print(f"wrote {out}")
    return 0
