"""What a new user meets on a first run, said in one line where it used to be silent or wrong:

- a ``--timesteps`` budget too small to learn (below DQN's ``learning_starts``, below one PPO / A2C rollout)
  trains, after one ``warning:`` line before training;
- the progress bar's last figures (games, score) are the run's summary's, not those of 50 steps before;
- ``retrokit eval RUN/model.zip`` of a run stopped before its end names the run's latest checkpoint;
- ``retrokit record --max-steps`` that cuts a game says so.

Real SB3 training runs, real run dirs, the installed ``retrokit``.
"""

from __future__ import annotations

import re
import shutil

import pytest
from retro_atari_kit.integrations.sb3.training.rules import budget_warning

from tests.cli._run import ENV, one_error_line, retrokit

pytestmark = pytest.mark.slow


def _config(algo: str, timesteps: int, n_envs: int = 1, **hyperparams) -> dict:
    return {"algo": algo, "timesteps": timesteps, "n_envs": n_envs, "hyperparams": hyperparams}


def test_a_budget_below_learning_starts_or_one_rollout_is_a_warning():
    line = budget_warning(_config("dqn", 3000, learning_starts=100_000))
    assert line == (
        "warning: --timesteps 3000 is not more than dqn's learning_starts (100000): the run only fills its "
        "replay buffer and learns nothing; pass --timesteps above 100000 or --set learning_starts=N below "
        "3000"
    )
    assert budget_warning(_config("dqn", 100_001, learning_starts=100_000)) is None
    assert "learning_starts (100)" in budget_warning(_config("qrdqn", 100))  # SB3's own default
    line = budget_warning(_config("ppo", 64, n_envs=2, n_steps=128))
    assert "less than one ppo rollout (n_steps 128 x 2 envs = 256 steps)" in line
    assert budget_warning(_config("ppo", 256, n_envs=2, n_steps=128)) is None
    assert "n_steps 5 x 4 envs = 20 steps" in budget_warning(_config("a2c", 10, n_envs=4))  # SB3's default
    assert budget_warning(_config("dqn", 64, n_steps=3, learning_starts=10)) is None  # n-step returns


@pytest.fixture(scope="module")
def short_games_run(tmp_path_factory):
    """A finished 96-step PPO run whose games last 10 steps (so games end while it trains), checkpoints at
    32, 64 and 96 steps: ``(folder, the train command's result)``."""
    base = tmp_path_factory.mktemp("first-run")
    res = retrokit(
        "train", "ppo", ENV, "--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32",
        "--env-kwarg", "max_episode_steps=10", "--timesteps", "96", "--checkpoint-every", "32",
        "--run-dir", "run", cwd=base,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return base, res


def test_the_progress_bar_ends_on_the_summarys_figures(short_games_run):
    _, res = short_games_run
    summary = re.search(r"recent true score (\S+) over the last (\d+) games", res.stdout)
    assert summary, res.stdout[-2000:]
    bars = re.findall(r"score\(100\) (\S+), games (\d+)\]", res.stderr)
    assert bars, res.stderr[-2000:]
    score, games = bars[-1]
    assert int(games) == int(summary.group(2)) >= 9  # 96 steps of 10-step games
    assert float(score) == pytest.approx(float(summary.group(1)), abs=0.051)
    assert "warning:" not in res.stdout  # 96 steps: three whole rollouts of 32


def test_eval_of_the_model_of_a_run_stopped_before_its_end_names_its_checkpoint(short_games_run, tmp_path):
    base, _ = short_games_run
    shutil.copytree(base / "run", tmp_path / "run")
    (tmp_path / "run" / "model.zip").unlink()  # as a run stopped before its end leaves it
    res = retrokit("eval", "run/model.zip", "--episodes", "1", cwd=tmp_path)
    latest = "latest checkpoint is run/checkpoints/model_96_steps.zip (96 steps)"
    one_error_line(res, "run/model.zip: no such file", latest, "pass the run dir run to play it")
    res = retrokit("eval", "rn", "--episodes", "1", cwd=tmp_path)
    one_error_line(res, "rn: no such run dir or model file (did you mean run?)")
    res = retrokit("eval", "run", "--episodes", "1", cwd=tmp_path)  # what the line says to do
    assert res.returncode == 0, res.stderr[-2000:]


def test_record_says_when_max_steps_cuts_a_game(short_games_run, tmp_path):
    base, _ = short_games_run
    res = retrokit("record", str(base / "run"), "--out", "a.gif", "--max-steps", "4", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    cut = [line for line in res.stderr.splitlines() if "--max-steps" in line]
    assert cut == [
        "retrokit: warning: game 1 was cut at --max-steps 4 before the game ended: the video and its score "
        "stop there (raise --max-steps for whole games)"
    ]
    res = retrokit("record", str(base / "run"), "--out", "b.gif", "--episodes", "2", cwd=tmp_path)
    assert res.returncode == 0 and "--max-steps" not in res.stderr, res.stderr[-2000:]  # whole 10-step games


def test_a_dqn_budget_below_learning_starts_trains_after_one_warning_line(tmp_path):
    res = retrokit(
        "train", "dqn", ENV, "--n-envs", "1", "--set", "buffer_size=1000", "--timesteps", "64",
        "--run-dir", "run", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    warnings = [line for line in res.stdout.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: --timesteps 64 is not more than dqn's learning_starts (100000): the run only fills its "
        "replay buffer and learns nothing; pass --timesteps above 100000 or --set learning_starts=N below 64"
    ]
    lines = res.stdout.splitlines()
    assert lines.index(warnings[0]) < next(i for i, line in enumerate(lines) if line.startswith("done:"))
