"""User mistakes against the installed ``retrokit`` command, as a user types them: exit 2, exactly one line on
stderr naming the fix (no ale-py banner, no traceback), and nothing written. Real ALE, real SB3, real Ray
(every RLlib mistake here is refused before Ray starts)."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.cli._run import CHILD_ENV, ENV, RETROKIT, one_error_line, retrokit
from tests.cli._run import snapshot as files_under


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


RLLIB = ["--engine", "rllib"]
NO_CUDA = pytest.mark.skipif(_cuda(), reason="this machine has a CUDA GPU: the request is valid here")


@pytest.mark.parametrize(
    "argv, needles",
    [
        # the RLlib engine checks what the SB3 engine checks, with the same words
        pytest.param([*RLLIB, "--device", "cuda"], ["--device cuda", "--device auto"], marks=NO_CUDA),
        pytest.param([*RLLIB, "--num-gpus", "1"], ["--num-gpus 1", "0 usable CUDA GPU"], marks=NO_CUDA),
        ([*RLLIB, "--device", "cuda:1"], ["--device cuda:1"]),
        ([*RLLIB, "--device", "tpu"], ["unknown device 'tpu'", "cpu"]),
        (["--device", "tpu"], ["unknown device 'tpu'", "cpu"]),
        ([*RLLIB, "--backend", "bogus"], ["unknown backend 'bogus'", "subprocess"]),
        (["--backend", "bogus"], ["unknown backend 'bogus'", "subprocess"]),
        # value ranges (both engines' names): trained to inf / nan before
        (["--set", "gamma=2"], ["--set gamma=2", "gamma must be in (0, 1]"]),
        ([*RLLIB, "--set", "gamma=2"], ["--set gamma=2", "gamma must be in (0, 1]"]),
        (["--set", "learning_rate=0"], ["learning_rate must be > 0"]),
        (["--set", "learning_rate=lin_-1e-4"], ["learning_rate must be > 0"]),
        ([*RLLIB, "--set", "lr=-1"], ["lr must be > 0"]),
        (["--set", "gae_lambda=1.5"], ["gae_lambda must be in [0, 1]"]),
        (["--set", "ent_coef=-0.01"], ["ent_coef must be >= 0"]),
        (["--set", "n_steps=0"], ["n_steps must be >= 1"]),
        (["--set", "clip_range=0"], ["clip_range must be > 0"]),
        (["--set", "train_freq=0"], ["train_freq must be >= 1"]),
        (["--set", "train_freq=[0, step]"], ["train_freq must be >= 1"]),
        (["--set", "learning_rate={schedule: linear, initial: -1}"], ["its initial value must be > 0"]),
        (
            ["--set", "ent_coef={schedule: linear, initial: 0.01, final: -1}"],
            ["its final value must be >= 0"],
        ),
        (["--preset", "sticky", "--set", "clip_range.initial=0"], ["its initial value must be > 0"]),
        # an ent_coef schedule is the kit's fast learners' (SB3's PPO multiplies a number)
        (
            ["--set", "ent_coef={schedule: linear, initial: 0.01}"],
            ["--set ent_coef: SB3's PPO and A2C take a number", "--set fast_learner=true"],
        ),
        # the vector backend is an option of its own (RLlib failed with a TypeError)
        ([*RLLIB, "--env-kwarg", "backend=bogus"], ["--env-kwarg backend=bogus", "use --backend bogus"]),
        (["--env-kwarg", "backend=native"], ["use --backend native"]),
        # counts are whole numbers, never rounded
        (["--n-envs", "2.7"], ["--n-envs", "'2.7' is not a whole number"]),
        # seeds numpy and gymnasium take (tracebacks from numpy before); empty values are not defaults
        (["--seed", "-1"], ["--seed", "must be in [0, 4294967295]"]),
        (["--seed", "4294967296"], ["--seed", "must be in [0, 4294967295]"]),
        (["--timesteps", ""], ["--timesteps ''", "not a number"]),
        (["--run-dir", ""], ["--run-dir ''", "names no folder"]),
        # an on-policy algo has no replay buffer: the flag was silently ignored
        (["--save-replay-buffer"], ["--save-replay-buffer", "ppo has no replay buffer"]),
        ([*RLLIB, "--num-env-runners", "1.5"], ["--num-env-runners", "not a whole number"]),
    ],
)
def test_train_mistakes_are_one_line_and_write_nothing(argv, needles, tmp_path):
    # a short budget: where a mistake is not caught, the run ends soon (and the test fails on exit 0)
    res = retrokit("train", "ppo", ENV, "--run-dir", "run", "--timesteps", "64", *argv, cwd=str(tmp_path))
    one_error_line(res, *needles)
    assert os.listdir(tmp_path) == []  # no run dir, no config.yaml


@pytest.mark.parametrize("env_id", ["Pong-v0", "ALE/Pong-v5", "PongNoFrameskip-v4"])
def test_another_packages_id_names_the_kits_id(env_id, tmp_path):
    line = one_error_line(retrokit("train", "ppo", env_id, cwd=str(tmp_path)), "use RetroKit/Pong-v0")
    assert "backend" not in line
    assert os.listdir(tmp_path) == []


def test_a_run_dir_under_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("x")
    res = retrokit("train", "ppo", ENV, "--run-dir", "afile/sub", cwd=str(tmp_path))
    one_error_line(res, "afile", "is a file, not a folder", "--run-dir")
    assert os.listdir(tmp_path) == ["afile"] and (tmp_path / "afile").read_text() == "x"


@pytest.fixture
def read_only(tmp_path):
    """``tmp_path/ro``, a folder with mode 0o555 (the commands run with ``modes_bind``)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        yield ro
    finally:
        ro.chmod(0o755)


def test_a_run_dir_under_a_read_only_folder_is_refused(read_only, tmp_path):
    res = retrokit("train", "ppo", ENV, "--run-dir", "ro/sub/run", cwd=str(tmp_path), modes_bind=True)
    one_error_line(res, "ro", "is not writable", "--run-dir")
    assert os.listdir(read_only) == [] and os.listdir(tmp_path) == ["ro"]


def test_resume_refuses_options_it_would_ignore(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("kind: retro-atari-kit run\n")
    before = files_under(str(tmp_path))
    res = retrokit(
        "train", "--resume", "run", "--set", "gamma=0.9", "--n-envs", "3", "--network", "impala",
        "--device", "cpu", cwd=str(tmp_path),
    )  # fmt: skip
    one_error_line(res, "--resume", "config.yaml", "--set", "--n-envs", "--network", "--device")
    assert files_under(str(tmp_path)) == before


# ------------------------------------------------------------------------------------------------------
# eval / record / plot on a real (tiny) SB3 run
# ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("trained")
    res = retrokit(
        "train", "ppo", ENV, "--run-dir", "run", "--timesteps", "32", "--n-envs", "1",
        "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "0", cwd=str(base),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return str(base / "run")


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["--env", "RetroKit/Breakout-v0"], ["model expects", "6 actions", "RetroKit/Breakout-v0", "and 4"]),
        (["--env-kwarg", "frame_stack=2"], ["model expects", "(4, 84, 84)", "(2, 84, 84)"]),
        (["--device", "tpu"], ["unknown device 'tpu'"]),
        (["--seed", "-1"], ["--seed", "must be in [0, 4294967295]"]),
    ],
)
def test_eval_mistakes_say_what_the_model_expects(argv, needles, run_dir, tmp_path):
    before = files_under(run_dir)
    line = one_error_line(retrokit("eval", run_dir, *argv, cwd=str(tmp_path)), *needles)
    assert "cannot read" not in line  # a device is not blamed on the model file
    assert files_under(run_dir) == before and os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "out, needles",
    [
        ("x.txt", ["--out 'x.txt'", ".mp4"]),
        ("videos", ["--out videos", "is a folder", "videos/agent.mp4"]),
        ("missing/agent.mp4", ["does not exist"]),
    ],
)
def test_record_checks_out_before_playing(out, needles, run_dir, tmp_path):
    (tmp_path / "videos").mkdir()
    res = retrokit("record", run_dir, "--out", out, cwd=str(tmp_path))
    one_error_line(res, *needles)
    assert sorted(os.listdir(tmp_path)) == ["videos"] and os.listdir(tmp_path / "videos") == []


def test_record_and_plot_refuse_a_read_only_folder(run_dir, read_only, tmp_path):
    base = str(tmp_path)
    res = retrokit("record", run_dir, "--out", "ro/agent.mp4", cwd=base, modes_bind=True)
    one_error_line(res, "--out ro/agent.mp4", "is not writable")
    res = retrokit("plot", run_dir, "--out", "ro/curves.png", cwd=base, modes_bind=True)
    one_error_line(res, "--out ro/curves.png", "is not writable")
    res = retrokit("plot", run_dir, "--out", "missing/curves.png", cwd=base)
    one_error_line(res, "does not exist")
    assert os.listdir(read_only) == [] and os.listdir(tmp_path) == ["ro"]


def test_plot_warns_about_rows_that_are_not_numbers(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    csv = run / "monitor" / "0.monitor.csv"
    with open(csv, "a") as fh:
        fh.write("-21.0,812,3.5,32\nabc,def,ghi\n,,\n-20.0,900,7.25,64\n")
    res = retrokit("plot", "run", "--out", "curves.png", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("retrokit: warning: "), res.stderr
    assert str(os.path.join("run", "monitor", "0.monitor.csv")) in lines[0] and "skipped 2 row" in lines[0]
    assert "run: 2 games" in res.stdout  # the two good rows are plotted
    assert (tmp_path / "curves.png").exists()


def _foreign_zip(path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data", "{not json")


@pytest.mark.parametrize(
    "cmd, kind, argv, needles",
    [
        ("eval", "text", ["--env", ENV], ["model.zip is not an SB3 model file", "not a zip file"]),
        ("eval", "truncated", ["--env", ENV], ["model.zip is not an SB3 model file"]),
        ("eval", "foreign", ["--env", ENV], ["model.zip is not an SB3 model file"]),
        ("eval", "text", [], ["pass --env ENV_ID"]),
        ("record", "foreign", ["--env", ENV, "--out", "a.mp4"], ["model.zip is not an SB3 model file"]),
    ],
)
def test_a_model_file_that_cannot_load_is_the_only_line(cmd, kind, argv, needles, run_dir, tmp_path):
    # the warning about pickled code comes only before a real load: an error that needs no load is the
    # one line on stderr
    model = tmp_path / "model.zip"
    if kind == "text":
        model.write_text("not a model\n")
    elif kind == "truncated":
        data = (Path(run_dir) / "model.zip").read_bytes()
        model.write_bytes(data[: len(data) // 2])
    else:
        _foreign_zip(model)
    before = files_under(str(tmp_path))
    line = one_error_line(retrokit(cmd, "model.zip", *argv, cwd=str(tmp_path)), *needles)
    assert "warning" not in line
    assert files_under(str(tmp_path)) == before


def test_import_roms_of_an_unreadable_folder_is_refused(tmp_path):
    roms = tmp_path / "roms"
    roms.mkdir()
    roms.chmod(0o000)
    try:
        res = retrokit("import-roms", "roms", cwd=str(tmp_path), modes_bind=True)
    finally:
        roms.chmod(0o755)
    one_error_line(res, "roms: permission denied")


def test_no_command_prints_the_help_and_one_error_line(tmp_path):
    res = retrokit(cwd=str(tmp_path))
    one_error_line(res, "missing COMMAND")
    assert "usage: retrokit" in res.stdout


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path):
    # `retrokit list | head -1`
    proc = subprocess.Popen(
        [RETROKIT, "list"], cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=CHILD_ENV
    )
    assert proc.stdout.readline().startswith(b"RetroKit/")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141  # 128 + SIGPIPE, as a shell reports a command ended by it
    assert err == ""
