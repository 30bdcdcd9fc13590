"""scripts/zoo_reference.py: rl-zoo3's monitor CSVs -> a reference curve at equal agent steps, plotted and
tabled against a real (tiny) kit run."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from retro_atari_kit.cli import main as retrokit
from retro_atari_kit.runs import read_monitor_csvs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "zoo_reference", os.path.join(ROOT, "scripts", "zoo_reference.py")
)
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="extract reads a git repository")

T0 = 1614621948.5
# (t_start, rows r,l,t) of two envs: env 1 starts 0.5 s later, so its t=1.0 game ends after env 0's t=1.2 one
ENV0 = (T0, [(1.0, 400, 0.5), (3.0, 800, 1.2), (0.0, 40, 9.0)])
ENV1 = (T0 + 0.5, [(2.0, 1200, 0.3), (5.0, 1000, 1.0)])
# by end time: 0.5 (env0), 0.8 (env1), 1.2 (env0), 1.5 (env1), 9.0 (env0); agent steps = cumulative l / 4
WANT = [(100, 1.0), (400, 2.0), (600, 3.0), (850, 5.0), (860, 0.0)]


def _monitor_csv(t_start: float, rows: list[tuple[float, int, float]]) -> str:
    head = "#" + json.dumps({"t_start": t_start, "env_id": "FooNoFrameskip-v4"}) + "\nr,l,t\n"
    return head + "".join(f"{r},{length},{t}\n" for r, length, t in rows)


def _git(repo, *args: str) -> str:
    ident = ["-c", "user.name=test", "-c", "user.email=test@example.com"]
    return subprocess.run(
        ["git", *ident, "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture()
def zoo_repo(tmp_path):
    """A tiny trained-agents repository: ppo/FooNoFrameskip-v4_1/{0,1}.monitor.csv and a file beside them."""
    repo = tmp_path / "rl-trained-agents"
    folder = repo / "ppo" / "FooNoFrameskip-v4_1"
    folder.mkdir(parents=True)
    for rank, env in enumerate([ENV0, ENV1]):
        (folder / f"{rank}.monitor.csv").write_text(_monitor_csv(*env))
    (folder / "evaluations.npz").write_bytes(b"not read")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "agents")
    return repo


def _extract(repo, out, *extra: str) -> int:
    return zoo.main(
        [
            "extract",
            "--repo",
            str(repo),
            "--algo",
            "ppo",
            "--env",
            "FooNoFrameskip-v4",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_extract_orders_games_of_all_envs_by_end_time_and_counts_frames_over_4(zoo_repo, tmp_path, capsys):
    out = tmp_path / "ref" / "zoo-ppo-foo.csv"
    assert _extract(zoo_repo, out) == 0
    text = out.read_text()
    comments = [line for line in text.splitlines() if line.startswith("#")]
    sha = _git(zoo_repo, "rev-parse", "HEAD").strip()
    assert any(sha in line for line in comments)  # the source commit
    assert any("ppo/FooNoFrameskip-v4_1/{0..1}.monitor.csv" in line for line in comments)
    assert any("/ 4" in line for line in comments)  # the frames -> agent steps conversion is stated
    x, score = zoo.read_reference(str(out))
    assert list(zip(x.tolist(), score.tolist(), strict=True)) == WANT
    assert "5 games from 2 envs, 3440 frames = 860 agent steps" in capsys.readouterr().out


def test_the_table_gives_the_reference_mean_at_each_mark(zoo_repo, tmp_path, capsys):
    out = tmp_path / "ref.csv"
    assert _extract(zoo_repo, out) == 0
    # a long reference: 12,000 games of 250 agent steps each, scores 0, 1, 2, ... -> 3M steps
    body = "".join(f"{250 * (i + 1)},{i}\n" for i in range(12_000))
    big = tmp_path / "big.csv"
    big.write_text("# made by hand\nagent_steps,score\n" + body)
    assert zoo.main(["table", "--reference", str(big), "--label", "zoo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # 0.5M: the last game ended by it is game 2000 (index 1999): mean of scores 1900..1999 = 1949.5
    assert any(line.split() == ["0.5M", "1949.50"] for line in lines)
    assert any(line.split() == ["1M", "3949.50"] for line in lines)
    assert any(line.split() == ["3M", "11949.50"] for line in lines)  # 12,000 games end exactly at 3M
    assert not any(line.split()[:1] == ["5M"] for line in lines)  # not reached: not shown
    # --smooth 10 and --max-steps cut the marks and the window
    assert zoo.main(["table", "--reference", str(big), "--smooth", "10", "--max-steps", "1.5e6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split() == ["1M", "3994.50"] for line in lines)
    assert not any(line.split()[:1] == ["2M"] for line in lines)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> str:
    """A real kit run that finishes games in 256 steps: Pong cut at 50 agent steps a game."""
    run = str(tmp_path_factory.mktemp("runs") / "pong-tiny")
    argv = ["train", "ppo", "RetroKit/Pong-v0", "--timesteps", "256", "--n-envs", "1", "--set", "n_steps=32"]
    argv += ["--set", "batch_size=32", "--env-kwarg", "max_episode_steps=50", "--run-dir", run]
    assert retrokit(argv) == 0
    return run


def test_plot_draws_the_reference_and_a_kit_run_and_tables_both(tiny_run, tmp_path, capsys):
    import matplotlib.image as mpimg

    games = read_monitor_csvs(tiny_run)
    assert games["r"].size >= 4  # 256 steps of 50-step games
    steps = [50 * (i + 1) for i in range(20)]
    ref = tmp_path / "ref.csv"
    ref.write_text("# test\nagent_steps,score\n" + "".join(f"{s},{i % 3}\n" for i, s in enumerate(steps)))
    out = tmp_path / "docs" / "curve.png"
    argv = ["plot", "--reference", str(ref), "--label", "zoo", tiny_run, "--out", str(out), "--smooth", "2"]
    assert zoo.main(argv + ["--title", "tiny"]) == 0
    assert mpimg.imread(str(out)).shape[2] in (3, 4)  # a real PNG
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "pong-tiny" in printed
    # the run's column is its own 2-game mean at the last game ended by the mark: its x is read from the kit's
    # monitor (cumulative agent steps), the reference at 0.5M is not reached (1000 steps): no row at all
    assert "0.5M" not in printed
    curves = zoo.load_curves(str(ref), "zoo", [tiny_run], 2, None)
    mark = float(games["steps"][-1])
    i = int(np.searchsorted(games["steps"], mark, side="right")) - 1
    assert zoo.value_at(curves[1][1], curves[1][2], mark) == pytest.approx(
        games["r"][max(0, i - 1) : i + 1].mean()
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["table", "--reference", "/no/such.csv"], "no such file; make it with"),
        (["table", "--reference", "README.md"], "not a reference CSV"),
        (["plot", "--reference", "REF", "/no/run", "--out", "OUT"], "/no/run: no such run dir"),
        (["plot", "--reference", "REF", "RUN", "--out", "x.jpg"], "use a .png file name"),
        (
            ["extract", "--repo", "/no/repo", "--algo", "ppo", "--env", "X", "--out", "x.csv"],
            "no such folder",
        ),
    ],
)
def test_bad_input_gets_one_line(argv, says, tmp_path, capsys):
    ref = tmp_path / "ref.csv"
    ref.write_text("agent_steps,score\n10,1\n")
    subs = {"REF": str(ref), "RUN": str(tmp_path), "OUT": str(tmp_path / "x.png")}
    argv = [subs.get(a, a) for a in argv]
    argv = [os.path.join(ROOT, a) if a == "README.md" else a for a in argv]
    assert zoo.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zoo_reference: error:") and says in err[0]


def test_extract_refuses_a_damaged_monitor_csv_and_names_the_env(zoo_repo, tmp_path, capsys):
    folder = zoo_repo / "ppo" / "FooNoFrameskip-v4_1"
    (folder / "1.monitor.csv").write_text(_monitor_csv(*ENV1) + "oops,1,2\n")
    _git(zoo_repo, "commit", "-q", "-am", "damage")
    assert _extract(zoo_repo, tmp_path / "x.csv") == 2
    err = capsys.readouterr().err
    assert "ppo/FooNoFrameskip-v4_1/1.monitor.csv" in err and not (tmp_path / "x.csv").exists()
    assert _extract(zoo_repo, tmp_path / "x.csv", "--env", "FooNoFrameskip-v5") == 2
    assert "did you mean FooNoFrameskip-v4" in capsys.readouterr().err
