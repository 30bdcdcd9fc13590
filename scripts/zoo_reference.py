"""rl-zoo3's published training curves as a reference for the kit's runs, at equal agent steps.

    python scripts/zoo_reference.py extract --repo /work/.mirror/DLR-RM+rl-trained-agents/repo \\
        --algo ppo --env BreakoutNoFrameskip-v4 --out results/reference/zoo-ppo-breakout.csv
    python scripts/zoo_reference.py plot --reference results/reference/zoo-ppo-breakout.csv \\
        --label "rl-zoo3 PPO" RUN_DIR [RUN_DIR ...] --out docs/x.png [--title T] [--max-steps N] \\
        [--smooth 100]
    python scripts/zoo_reference.py table --reference results/reference/zoo-ppo-breakout.csv [RUN_DIR ...]

``extract`` reads the SB3 monitor CSVs that rl-zoo3's trained-agents repository (DLR-RM/rl-trained-agents)
keeps per experiment (``<algo>/<env>_<n>/<rank>.monitor.csv``) from a git checkout or bare mirror of it and
writes one compact CSV, ``agent_steps,score``, one row per finished game. The zoo's ``Monitor`` wraps the
raw NoFrameskip env under SB3's ``AtariWrapper``, so each row is a whole game (all lives) with its true,
unclipped score, and its ``l`` counts emulator frames: 4 per agent step (frame skip 4). Games of all envs are
ordered by end time and ``agent_steps`` is the cumulative ``l`` / 4 over all of them. That is approximate:
the envs run in lockstep, so a game's x is good to within n_envs x a game's length, and the frames of no-op
and FIRE resets count as steps (the totals are 0.2-3 % above the zoo's 10M budgets). A kit run's x is the
same quantity (cumulative agent steps of finished games, ``read_monitor_csvs``), so the curves compare.

``plot`` draws the moving average of the true score against agent steps for the reference and each kit run;
``plot`` and ``table`` print the mean of the last ``--smooth`` games at 0.5M, 1M, 2M, 3M, 5M and 10M steps.
Not part of the package (it reads a repository of another project); kept here with its test
(tests/test_zoo_reference.py) because docs/results.md quotes its numbers.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from retro_atari_kit.cli.plot import default_title, moving_average
from retro_atari_kit.errors import RunError
from retro_atari_kit.runs import atomic_write, atomic_write_text, read_monitor_csvs

FRAMES_PER_STEP = 4  # SB3's AtariWrapper skips 4 frames per agent step
COLUMNS = "agent_steps,score"
MARKS = (500_000, *range(1_000_000, 10_000_001, 1_000_000))  # 0.5M, then every 1M to 10M
# a run stops with a game unfinished in every env, so its last finished game ends a little before its budget:
# a curve whose last game is within this fraction of a mark counts as having reached it
REACH_SLACK = 0.01
MONITOR_SUFFIX = ".monitor.csv"


class ScriptError(Exception):
    """A user error: printed as one line ``zoo_reference: error: ...``, exit code 2."""


# --- extract -----------------------------------------------------------------------------------------------


def _git(repo: str, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", repo, *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise ScriptError("git is not installed; install it to read the trained-agents repository") from None
    if done.returncode != 0:
        raise ScriptError(f"git {' '.join(args)} in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _source_name(repo: str) -> str:
    """The repository's address: its origin remote, else ``owner/name`` from a mirror folder named
    ``owner+name``, else the path."""
    try:
        url = _git(repo, "config", "--get", "remote.origin.url").decode().strip()
    except ScriptError:
        url = ""
    if url:
        return url
    for part in reversed(os.path.abspath(repo).split(os.sep)):
        if re.fullmatch(r"[\w.-]+\+[\w.-]+", part):
            return "https://github.com/" + part.replace("+", "/", 1)
    return os.path.abspath(repo)


def _brace(names: list[str]) -> str:
    """``{0..7}.monitor.csv`` for ranks 0..7, else the names joined."""
    ranks = sorted(int(n[: -len(MONITOR_SUFFIX)]) for n in names if n[: -len(MONITOR_SUFFIX)].isdigit())
    if len(ranks) == len(names) and ranks == list(range(len(ranks))) and len(ranks) > 1:
        return "{0.." + str(ranks[-1]) + "}" + MONITOR_SUFFIX
    return ",".join(sorted(names))


def find_experiment(repo: str, commit: str, algo: str, env: str, exp_id: int | None) -> tuple[str, list[str]]:
    """``(folder, monitor CSV paths)`` of ``<algo>/<env>_<n>`` at ``commit``; ScriptError naming what
    exists."""
    entries = _git(repo, "ls-tree", "--name-only", commit, "--", f"{algo}/").decode().split("\n")
    runs = {}
    for entry in filter(None, entries):
        name = entry.split("/", 1)[-1]
        m = re.fullmatch(r"(.+)_(\d+)", name)
        if m:
            runs.setdefault(m.group(1), []).append(int(m.group(2)))
    if not runs:
        top = [n for n in _git(repo, "ls-tree", "--name-only", "-d", commit).decode().split("\n") if n]
        raise ScriptError(f"no folder {algo}/ in {repo} at {commit[:12]}; --algo is one of {', '.join(top)}")
    if env not in runs:
        close = difflib.get_close_matches(env, list(runs), n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else f"it has {len(runs)} envs for {algo}"
        raise ScriptError(f"no {algo}/{env}_<n> in {repo}; {hint}")
    ids = sorted(runs[env])
    if exp_id is None:
        if len(ids) > 1:
            raise ScriptError(f"{algo}/{env} has experiments {ids}; choose one with --exp-id")
        exp_id = ids[0]
    elif exp_id not in ids:
        raise ScriptError(f"no {algo}/{env}_{exp_id}; --exp-id is one of {ids}")
    folder = f"{algo}/{env}_{exp_id}"
    listed = _git(repo, "ls-tree", "--name-only", commit, "--", f"{folder}/").decode().split("\n")
    files = sorted(p for p in listed if p.endswith(MONITOR_SUFFIX) and "/" not in p[len(folder) + 1 :])
    if not files:
        raise ScriptError(f"{folder} has no *{MONITOR_SUFFIX} (the zoo keeps them only for some agents)")
    return folder, files


def extract(
    repo: str, algo: str, env: str, out: str, exp_id: int | None = None, commit: str = "HEAD"
) -> dict:
    """Write the reference CSV of ``<algo>/<env>`` to ``out``; returns ``{games, agent_steps, frames,
    n_envs, commit, files}``."""
    if not os.path.isdir(repo):
        raise ScriptError(
            f"--repo {repo}: no such folder; pass a clone or mirror of DLR-RM/rl-trained-agents"
        )
    try:
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").decode().strip()
    except ScriptError:
        raise ScriptError(f"--repo {repo}: not a git repository with a commit {commit}") from None
    folder, files = find_experiment(repo, sha, algo, env, exp_id)
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            with open(os.path.join(tmp, os.path.basename(path)), "wb") as fh:
                fh.write(_git(repo, "show", f"{sha}:{path}"))
        notes: list[str] = []
        # the kit's reader orders the games of all envs by end time (each file's t_start + t), as wanted
        games = read_monitor_csvs(tmp, warnings=notes)
    if notes:  # a reference must be whole: damage is an error here, not a warning
        raise ScriptError(notes[0].replace(tmp + os.sep, folder + "/"))
    if games["r"].size == 0:
        raise ScriptError(f"{folder}: its monitor CSVs hold no finished game")
    steps = np.rint(games["steps"] / FRAMES_PER_STEP).astype(np.int64)
    scores = [str(int(r)) if float(r).is_integer() else f"{r:.3f}".rstrip("0") for r in games["r"]]
    header = [
        f"# rl-zoo3 reference curve: {algo.upper()} on {env}, one row per finished game "
        "(true, unclipped score)",
        f"# source: {_source_name(repo)} commit {sha}",
        f"# files: {folder}/{_brace([os.path.basename(p) for p in files])} ({len(files)} envs, SB3 Monitor "
        "under the AtariWrapper)",
        f"# agent_steps = cumulative frames (Monitor's l) / {FRAMES_PER_STEP} over all envs, games ordered "
        f"by end time (t_start + t); {int(games['steps'][-1])} frames = {int(steps[-1])} agent steps in all",
        f"# approximate: envs run in lockstep (a game's x is good to within {len(files)} x a game's length) "
        "and no-op/FIRE reset frames count as steps",
        f"# made by: python scripts/zoo_reference.py extract --repo REPO --algo {algo} --env {env}"
        + (f" --exp-id {exp_id}" if exp_id is not None else "")
        + (f" --commit {commit}" if commit != "HEAD" else ""),
        COLUMNS,
    ]
    body = "".join(f"{s},{r}\n" for s, r in zip(steps.tolist(), scores, strict=True))
    _write_parent(out)
    try:
        atomic_write_text(out, "\n".join(header) + "\n" + body)
    except OSError as exc:
        raise ScriptError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    return {"games": len(scores), "agent_steps": int(steps[-1]), "frames": int(games["steps"][-1]),
            "n_envs": len(files), "commit": sha, "files": files}  # fmt: skip


def _write_parent(out: str) -> None:
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise ScriptError(f"--out {out} is a folder; pass a file name")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise ScriptError(f"--out {out}: cannot create its folder ({exc.strerror or exc})") from None


# --- reading curves ----------------------------------------------------------------------------------------


def read_reference(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``(agent_steps, score)`` of a reference CSV written by ``extract``; ScriptError if it is not one."""
    if not os.path.isfile(path):
        raise ScriptError(
            f"--reference {path}: no such file; make it with `python {sys.argv[0]} extract ...`"
        )
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = [
            (i, line.strip()) for i, line in enumerate(fh, 1) if line.strip() and not line.startswith("#")
        ]
    if not lines or lines[0][1] != COLUMNS:
        raise ScriptError(
            f"--reference {path}: not a reference CSV (its first line after the # comments must be "
            f"{COLUMNS}); make it with the extract command"
        )
    steps, scores = [], []
    for i, line in lines[1:]:
        try:
            s, r = line.split(",")
            steps.append(float(s))
            scores.append(float(r))
        except ValueError:
            raise ScriptError(f"--reference {path}, line {i}: {line!r} is not agent_steps,score") from None
    x = np.asarray(steps)
    if x.size == 0 or np.any(np.diff(x) < 0) or not np.all(np.isfinite(x)):
        raise ScriptError(f"--reference {path}: no games, or agent_steps that go down; extract it again")
    return x, np.asarray(scores)


def read_run(run_dir: str, warn: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(cumulative agent steps, true score)`` of a kit run's finished games."""
    if not os.path.isdir(run_dir):
        raise ScriptError(f"{run_dir}: no such run dir")
    try:
        games = read_monitor_csvs(run_dir, warnings=warn)
    except RunError as exc:
        raise ScriptError(str(exc)) from None
    if games["r"].size == 0:
        raise ScriptError(f"{run_dir}: no finished game in its monitor CSVs yet")
    return games["steps"], games["r"]


Curve = tuple[str, np.ndarray, np.ndarray]  # (label, agent steps of each game, moving average)


def load_curves(
    reference: str, label: str, run_dirs: list[str], smooth: int, max_steps: float | None
) -> list[Curve]:
    """The reference first, then each run; smoothed over all games, then cut at ``max_steps``."""
    warn: list[str] = []
    raw = [(label, *read_reference(reference))]
    raw += [(os.path.basename(os.path.normpath(d)), *read_run(d, warn)) for d in run_dirs]
    for line in dict.fromkeys(warn):
        print(f"zoo_reference: warning: {line}", file=sys.stderr)
    curves = []
    for name, x, r in raw:
        mean = moving_average(r, smooth)
        keep = x <= max_steps if max_steps else np.ones(x.size, bool)
        curves.append((name, x[keep], mean[keep]))
    return curves


def value_at(x: np.ndarray, mean: np.ndarray, mark: float) -> float | None:
    """The moving average at the last game that ended by ``mark``, or None if the curve stops short of it."""
    if x.size == 0 or x[-1] < mark * (1 - REACH_SLACK):
        return None
    i = int(np.searchsorted(x, mark, side="right")) - 1
    return float(mean[i]) if i >= 0 else None


def marks_table(curves: list[Curve], max_steps: float | None = None) -> list[list[str]]:
    """Rows ``[mark, reference, run...]`` for the marks the reference and (given runs) at least one run
    reached; a run that did not reach a mark gets ``-``."""
    rows = []
    for mark in MARKS:
        if max_steps and mark > max_steps:
            continue
        values = [value_at(x, m, mark) for _, x, m in curves]
        if values[0] is None or (len(values) > 1 and all(v is None for v in values[1:])):
            continue
        rows.append([f"{mark / 1e6:g}M"] + ["-" if v is None else f"{v:.2f}" for v in values])
    return rows


def print_table(curves: list[Curve], smooth: int, max_steps: float | None) -> None:
    head = ["agent steps"] + [name for name, _, _ in curves]
    rows = marks_table(curves, max_steps)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"mean true score of the last {smooth} games at each mark (the last game ended by it):")
    for row in [head, *rows]:
        print("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    if not rows:
        print("  (no mark reached by the reference and a run)")


# --- plot --------------------------------------------------------------------------------------------------


def plot(curves: list[Curve], run_dirs: list[str], out: str, title: str | None, smooth: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    if title is None:
        runs_title = default_title(run_dirs) if run_dirs else None
        title = f"{runs_title} vs {curves[0][0]}" if runs_title else curves[0][0]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (name, x, mean) in enumerate(curves):
        style = {"color": "black", "linewidth": 1.6} if i == 0 else {"linewidth": 1.2}
        ax.plot(x, mean, label=f"{name} ({x.size} games)", **style)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}M"))
    ax.set_xlabel(f"agent steps (rl-zoo3: emulator frames / {FRAMES_PER_STEP})")
    ax.set_ylabel(f"true game score, mean of last {smooth} games")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    try:
        fig.tight_layout()
        atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    except OSError as exc:
        raise ScriptError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)


# --- command line ------------------------------------------------------------------------------------------


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 2e6)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zoo_reference", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("extract", help="monitor CSVs of the trained-agents repository -> one reference CSV")
    e.add_argument("--repo", required=True, help="clone or bare mirror of DLR-RM/rl-trained-agents")
    e.add_argument("--algo", required=True, help="the zoo's algorithm folder: ppo, a2c, dqn, ...")
    e.add_argument("--env", required=True, help="the zoo's env ID, e.g. BreakoutNoFrameskip-v4")
    e.add_argument("--exp-id", type=int, default=None, help="the _<n> of <env>_<n> (default: the only one)")
    e.add_argument("--commit", default="HEAD", help="commit of the repository to read (default: %(default)s)")
    e.add_argument("--out", required=True, help="reference CSV to write")
    for name in ("plot", "table"):
        q = sub.add_parser(
            name, help="reference vs kit runs: " + ("PNG and table" if name == "plot" else "table")
        )
        q.add_argument("run_dirs", nargs="*" if name == "table" else "+", metavar="RUN_DIR", help="kit runs")
        q.add_argument("--reference", required=True, help="CSV written by extract")
        q.add_argument("--label", default="rl-zoo3", help="the reference's name (default: %(default)s)")
        q.add_argument("--smooth", type=int, default=100, help="moving average over N games (default: 100)")
        q.add_argument("--max-steps", type=_positive, default=None, help="cut every curve at N agent steps")
        if name == "plot":
            q.add_argument("--out", required=True, help="PNG file to write")
            q.add_argument(
                "--title", default=None, help="figure title (default: the runs' env and algorithm)"
            )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "extract":
            info = extract(args.repo, args.algo, args.env, args.out, args.exp_id, args.commit)
            print(
                f"wrote {args.out}: {info['games']} games from {info['n_envs']} envs, "
                f"{info['frames']} frames = {info['agent_steps']} agent steps (commit {info['commit'][:12]})"
            )
            return 0
        if args.smooth < 1:
            raise ScriptError(f"--smooth {args.smooth}: use a window of at least 1 game")
        if args.command == "plot":
            if not args.out.lower().endswith(".png"):
                raise ScriptError(f"--out {args.out!r}: use a .png file name")
            _write_parent(args.out)
        curves = load_curves(args.reference, args.label, args.run_dirs, args.smooth, args.max_steps)
        if args.command == "plot":
            plot(curves, args.run_dirs, args.out, args.title, args.smooth)
        print_table(curves, args.smooth, args.max_steps)
        if args.command == "plot":
            print(f"wrote {args.out}")
        return 0
    except ScriptError as exc:
        print(f"zoo_reference: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
