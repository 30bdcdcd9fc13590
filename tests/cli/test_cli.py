"""End-to-end tests of the ``retrokit`` command on tiny budgets (real ALE Pong, real SB3 steps)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile

import pytest
import yaml

from retro_atari_kit.cli import main
from retro_atari_kit.runs import ENGINE_OPTIONS, checkpoint_path, list_checkpoints, read_monitor_csvs

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"
TINY = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=64", "--checkpoint-every", "64"]


def _rows(path: str) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> str:
    run = str(tmp_path_factory.mktemp("runs") / "pong")
    assert main(["train", "ppo", ENV, "--timesteps", "2.56e2", "--run-dir", run, *TINY]) == 0
    return run


def test_train_writes_the_run_layout(trained_run, capsys):
    files = set(os.listdir(trained_run))
    assert {"config.yaml", "model.zip", "checkpoints", "monitor", "progress.csv", "log.txt"} <= files
    assert any(f.startswith("events.out.tfevents") for f in files)
    cfg = yaml.safe_load(open(os.path.join(trained_run, "config.yaml")))
    assert cfg["algo"] == "ppo" and cfg["env_id"] == ENV and cfg["timesteps"] == 256
    assert cfg["hyperparams"]["n_steps"] == 32 and cfg["n_envs"] == 2
    rows = _rows(os.path.join(trained_run, "progress.csv"))
    assert int(rows[-1]["time/total_timesteps"]) == 256
    monitors = sorted(os.listdir(os.path.join(trained_run, "monitor")))
    assert monitors == ["0.monitor.csv", "1.monitor.csv"]
    ckpts = sorted(os.listdir(os.path.join(trained_run, "checkpoints")))
    assert "model_256_steps.zip" in ckpts and "model_64_steps.zip" in ckpts
    assert not [f for f in os.listdir(trained_run) if ".tmp" in f]  # atomic writes leave no temporaries
    from stable_baselines3 import PPO

    model = PPO.load(os.path.join(trained_run, "model.zip"))
    assert model.num_timesteps == 256
    assert model.observation_space.shape == (4, 84, 84)


def test_train_prints_config_and_memory_estimate(tmp_path, capsys):
    run = str(tmp_path / "r")
    assert (
        main(
            [
                "train",
                "a2c",
                ENV,
                "--timesteps",
                "40",
                "--run-dir",
                run,
                "--n-envs",
                "2",
                "--checkpoint-every",
                "0",
                "--network",
                "impala",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "algo: a2c" in out and "network: impala" in out
    assert "estimated RAM" in out and "available" in out
    assert f"results in {run}" in out
    assert "precision: float32 on cpu" in out  # the default presets are float32


def test_train_says_when_the_cnn_runs_in_bf16(tmp_path, capsys):
    from retro_atari_kit.integrations.sb3 import native_bf16

    run = str(tmp_path / "r")
    assert main(["train", "ppo", ENV, "--timesteps", "64", "--run-dir", run, "--preset", "bf16", *TINY]) == 0
    out = capsys.readouterr().out
    if native_bf16("cpu"):  # a CPU with AVX512-BF16 or AMX
        assert "precision: CNN under bf16 autocast (cpu has native bf16)" in out
    else:
        assert "precision: float32 on cpu (autocast='bf16' ignored: no native bf16" in out


def test_eval_reports_true_scores(trained_run, capsys):
    assert main(["eval", trained_run, "--episodes", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["episodes"] == 1 and result["steps"] == 256
    # a whole Pong game: 21 points to one side, unclipped true score in [-21, 21], integral
    assert -21 <= result["mean"] <= 21 and result["mean"] == int(result["mean"])
    assert result["min"] <= result["mean"] <= result["max"]


def test_eval_warns_for_model_outside_run_dir(trained_run, tmp_path, capsys):
    foreign = tmp_path / "m.zip"
    foreign.write_bytes(open(os.path.join(trained_run, "model.zip"), "rb").read())
    assert main(["eval", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert "--env" in err and "pickled code" not in err  # nothing is loaded without --env: one line
    assert main(["eval", str(foreign), "--env", "RetroKit/Breakout-v0"]) == 2  # it would need unpickling
    err = capsys.readouterr().err
    assert "--allow-pickle" in err and "model expects" not in err
    argv = ["eval", str(foreign), "--env", "RetroKit/Breakout-v0", "--allow-pickle"]
    assert main(argv) == 2  # loaded as asked, then refused
    err = capsys.readouterr().err
    assert "pickled code" in err and "model expects" in err


def test_plot_writes_png(trained_run, tmp_path, capsys):
    out = tmp_path / "curves.png"
    argv = ["plot", trained_run, trained_run, "--x", "episodes", "--smooth", "1", "5", "--out", str(out)]
    assert main(argv) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_reads_monitor_episodes(tmp_path):
    from retro_atari_kit.cli.plot import moving_average

    mon = tmp_path / "monitor"
    mon.mkdir()
    head = '#{"t_start": 100.0, "env_id": "x"}\nr,l,t\n'
    (mon / "0.monitor.csv").write_text(head + "-21,800,5.0\n-19,900,9.0\n")
    (mon / "1.monitor.csv").write_text('#{"t_start": 101.0, "env_id": "x"}\nr,l,t\n-20,850,6.0\n')
    d = read_monitor_csvs(str(tmp_path))
    assert d["r"].tolist() == [-21.0, -20.0, -19.0]  # ordered by wall-clock end time across files
    assert d["steps"].tolist() == [800, 1650, 2550]
    assert moving_average(d["r"], 2).tolist() == [-21.0, -20.5, -19.5]


def test_record_writes_video(trained_run, tmp_path, capsys):
    out = tmp_path / "agent.mp4"
    assert main(["record", trained_run, "--out", str(out), "--max-steps", "60"]) == 0
    written = capsys.readouterr().out.strip().splitlines()[-1]
    assert os.path.getsize(written) > 1000
    import imageio.v3 as iio

    frame = next(iter(iio.imiter(written)))
    assert frame.ndim == 3 and frame.shape[2] == 3  # full colour
    assert frame.std(axis=2).max() > 0


def test_list_and_bench(capsys):
    assert main(["list", "--system", "atari2600", "--available"]) == 0
    out = capsys.readouterr().out
    assert "RetroKit/Pong-v0" in out and "RetroKit/Pong-Atari2600-v0" in out and "missing" not in out
    assert main(["bench", ENV, "--n-envs", "2", "--steps", "20"]) == 0
    assert "steps/s" in capsys.readouterr().out


def test_import_roms_reports(tmp_path, capsys):
    (tmp_path / "notarom.txt").write_text("hello")
    assert main(["import-roms", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip()


def _fails(argv: list[str], capsys, *needles: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("retrokit: error:")
    for n in needles:
        assert n in err, err


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["train", "sac", ENV], ["unknown algo 'sac'", "ppo"]),
        (["train", "ppo", "RetroKit/Pongg-v0"], ["unknown env", "RetroKit/Pong-v0"]),
        (["train", "ppo", ENV, "--network", "resnet"], ["unknown network 'resnet'", "impala"]),
        (["train", "ppo", ENV, "--preset", "nope"], ["unknown preset 'nope'"]),
        (["train", "ppo", ENV, "--set", "n_step=5"], ["unknown hyperparameter 'n_step'", "n_steps"]),
        (["train", "ppo", ENV, "--set", "n_steps"], ["malformed --set", "key=value"]),
        (["train", "ppo", ENV, "--set", "policy_kwargs.net_arch=foo"], ["cannot build ppo", "--set"]),
        (
            ["train", "ppo", ENV, "--set", "learning_rate=abc"],
            ["learning_rate", "cannot read schedule 'abc'"],
        ),
        (["train", "ppo", ENV, "--set", "gamma=abc"], ["gamma", "float"]),
        (["train", "ppo", ENV, "--set", "n_epochs=abc"], ["n_epochs", "int"]),
        (["train", "ppo", ENV, "--set", "ent_coef=[1]"], ["ent_coef", "float"]),
        (["train", "ppo", ENV, "--set", "normalize=true"], ["normalize", "not used"]),
        (["train", "ppo", ENV, "--set", "env_wrapper=x"], ["env_wrapper", "--env-kwarg"]),
        (
            ["train", "ppo", ENV, "--backend", "warp", "--run-dir", "runs/x"],
            ["unknown backend 'warp'", "native"],
        ),
        (
            ["train", "ppo", "RetroKit/Pong-Atari2600-v0", "--backend", "native"],
            ["--backend native", "subprocess"],
        ),
        (["train", "ppo", ENV, "--engine", "tf"], ["invalid choice: 'tf'"]),
        (["train", "ppo", ENV, "--timesteps", "lots"], ["--timesteps", "2e6"]),
        (["train", "ppo", ENV, "--env-kwarg", "frame_skipp=3"], ["frame_skipp"]),
        (["train", "ppo", "RetroKit/SonicTheHedgehog-Genesis-v0"], ["import-roms"]),
        (["train", "ppo", ENV, "--n-envs", "0"], ["--n-envs"]),
        (["eval", "/no/such/run"], ["no such run dir"]),
        (["plot", "/no/such/run"], ["no such run dir"]),
        (["list", "--system", "amiga"], ["unknown system 'amiga'"]),
        (["import-roms", "/no/such/dir"], ["no such file or folder"]),
        (["frobnicate"], ["invalid choice"]),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, needles, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if "RetroKit/Pong-Atari2600-v0" in argv:
        from retro_atari_kit.roms import ensure_rom

        ensure_rom("Pong-Atari2600")  # a fresh machine installs ale-py's ROM on first use, with a note
        capsys.readouterr()
    _fails(argv, capsys, *needles)
    assert not os.path.exists(tmp_path / "runs")  # nothing was created


def test_existing_run_dir_is_refused_and_untouched(trained_run, capsys):
    before = {f: os.path.getmtime(os.path.join(trained_run, f)) for f in os.listdir(trained_run)}
    _fails(["train", "ppo", ENV, "--run-dir", trained_run], capsys, "exists", "--resume", "--force")
    assert before == {f: os.path.getmtime(os.path.join(trained_run, f)) for f in os.listdir(trained_run)}


def test_unreadable_checkpoint_is_refused(tmp_path, capsys):
    run = str(tmp_path / "r")
    assert main(["train", "ppo", ENV, "--timesteps", "64", "--run-dir", run, *TINY]) == 0
    capsys.readouterr()
    with open(os.path.join(run, "checkpoints", "model_999999_steps.zip"), "wb") as fh:
        fh.write(b"garbage")
    _fails(["train", "--resume", run], capsys, "cannot read checkpoint", "model_999999_steps.zip")
    assert os.path.getsize(os.path.join(run, "checkpoints", "model_999999_steps.zip")) == 7


def test_sigint_saves_checkpoint_and_resume_continues(tmp_path):
    run = str(tmp_path / "r")
    cmd = [
        sys.executable,
        "-m",
        "retro_atari_kit.cli",
        "train",
        "ppo",
        ENV,
        "--timesteps",
        "1e6",
        "--run-dir",
        run,
        *TINY,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = os.path.join(run, "checkpoints", "model_64_steps.zip")
        while not os.path.exists(first):  # training is under way once the first checkpoint exists
            assert proc.poll() is None, proc.communicate()
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"resume with: retrokit train --resume {run}" in out
    steps, path = list_checkpoints(run)[-1]
    assert zipfile.is_zipfile(path) and steps >= 64
    from stable_baselines3 import PPO

    assert PPO.load(path).num_timesteps == steps
    # resume to a new total: continues at the checkpoint's step count with the same config
    assert main(["train", "--resume", run, "--timesteps", str(steps + 128)]) == 0
    final = PPO.load(os.path.join(run, "model.zip"))
    assert final.num_timesteps == steps + 128
    rows = _rows(os.path.join(run, "progress.csv"))
    totals = [int(r["time/total_timesteps"]) for r in rows]
    assert totals == sorted(totals) and totals[-1] == steps + 128 and totals[0] <= 64
    assert os.path.isdir(os.path.join(run, "monitor", "resume-1"))
    cfg = yaml.safe_load(open(os.path.join(run, "config.yaml")))
    assert cfg["timesteps"] == steps + 128 and cfg["hyperparams"]["n_steps"] == 32


def test_the_run_steps_at_each_game_end_are_the_learners_count_across_a_resume(tmp_path, capsys):
    # games cut at 20 steps of the stack, 2 of them the fire reset's: each env's games end every 18 of the
    # learner's steps per env; the resume starts from the 128-step checkpoint (games in flight there are lost)
    run = str(tmp_path / "r")
    short = ["--env-kwarg", "max_episode_steps=20"]
    assert main(["train", "ppo", ENV, "--timesteps", "128", "--run-dir", run, *TINY, *short]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "256"]) == 0
    # the score window goes on across the resume: the 6 games before it and the 6 after
    assert "over the last 12 games" in capsys.readouterr().out
    start = json.load(open(os.path.join(run, "monitor", "resume-1", "start.json")))
    assert start == {"num_timesteps": 128}
    games = read_monitor_csvs(run)
    assert games["run_steps"].tolist() == [36, 36, 72, 72, 108, 108, 164, 164, 200, 200, 236, 236]
    assert games["steps"][-1] == 12 * 20  # the games' own lengths, fire reset steps included
    exported = str(tmp_path / "export")
    assert main(["export", run, exported]) == 0  # the segment's start travels with its monitor CSVs
    assert read_monitor_csvs(exported)["run_steps"].tolist() == games["run_steps"].tolist()


def test_resume_after_a_hard_kill_sets_aside_logs_past_the_checkpoint(trained_run, tmp_path, capsys):
    # A run killed with SIGKILL after its 64-step checkpoint: progress rows up to 256 steps, and games
    # that ended after the checkpoint was written, which the resumed model does not descend from.
    run = str(tmp_path / "killed")
    shutil.copytree(trained_run, run)  # copy2 keeps mtimes: the checkpoint's write time is the cut
    for steps, path in list_checkpoints(run):
        if steps > 64:
            os.remove(path)
    os.remove(os.path.join(run, "model.zip"))
    saved_at = os.path.getmtime(checkpoint_path(run, 64))
    monitor = os.path.join(run, "monitor", "0.monitor.csv")
    t_start = json.loads(open(monitor).readline()[1:])["t_start"]
    before = f"-21.0,800,{saved_at - t_start - 1:.6f},64\n"
    after = f"-20.0,900,{saved_at - t_start + 1:.6f},128\n"
    with open(monitor, "a") as fh:
        fh.write(before + after)
    original = open(monitor).read()
    capsys.readouterr()

    assert main(["train", "--resume", run, "--timesteps", "128"]) == 0
    out = capsys.readouterr().out
    assert "set aside 1 games and 3 progress rows" in out and "orphaned-1" in out
    lines = open(monitor).readlines()
    assert lines[-1] == before and after not in lines
    assert open(os.path.join(run, "orphaned-1", "monitor", "0.monitor.csv")).read() == original
    assert list(read_monitor_csvs(run)["r"]) == [-21.0]  # the set-aside copies are not plotted
    totals = [int(r["time/total_timesteps"]) for r in _rows(os.path.join(run, "progress.csv"))]
    assert totals == [64, 128]  # 64 kept from the first segment, no duplicate stretch
    old = _rows(os.path.join(run, "orphaned-1", "progress.csv"))
    assert [int(r["time/total_timesteps"]) for r in old] == [64, 128, 192, 256]


def test_dqn_resume_restores_replay_buffer(tmp_path, capsys):
    run = str(tmp_path / "dqn")
    argv = [
        "train",
        "dqn",
        ENV,
        "--timesteps",
        "200",
        "--run-dir",
        run,
        "--n-envs",
        "2",
        "--set",
        "buffer_size=1000",
        "--set",
        "learning_starts=50",
        "--checkpoint-every",
        "100",
        "--save-replay-buffer",
    ]
    assert main(argv) == 0
    assert os.path.exists(os.path.join(run, "checkpoints", "replay_buffer.npz"))
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "300"]) == 0
    out = capsys.readouterr().out
    assert "replay buffer restored" in out and "resuming from" in out
    from stable_baselines3 import DQN

    model = DQN.load(os.path.join(run, "model.zip"))
    assert 300 <= model.num_timesteps < 300 + 8  # whole train_freq rounds of 4 steps x 2 envs

    # a copy without its buffer (runs-in-progress/ commits none) resumes and says the buffer refills
    os.remove(os.path.join(run, "checkpoints", "replay_buffer.npz"))
    assert main(["train", "--resume", run, "--timesteps", "400"]) == 0
    out = capsys.readouterr().out
    assert "no replay buffer at" in out and "refills from empty" in out and "resuming from" in out


def test_memory_estimate_refuses_oversized_replay_buffer(tmp_path, capsys):
    run = tmp_path / "big"
    _fails(
        ["train", "dqn", ENV, "--set", "buffer_size=100000000", "--run-dir", str(run)],
        capsys,
        "RAM",
        "buffer_size",
        "--force",
    )
    assert not run.exists()


def _hold_lock(run: str) -> subprocess.Popen:
    """A real process holding ``run``'s lock, as a trainer does, until it is killed."""
    code = "import sys, time; from retro_atari_kit.runs import RunLock; RunLock(sys.argv[1]).acquire(); "
    code += "print('held', flush=True); time.sleep(120)"
    holder = subprocess.Popen([sys.executable, "-c", code, run], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_resume_refuses_a_run_that_is_still_training(trained_run, capsys):
    holder = _hold_lock(trained_run)
    try:
        _fails(["train", "--resume", trained_run], capsys, "still training", f"kill -TERM {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
        os.remove(os.path.join(trained_run, ".train.pid"))  # a SIGKILLed holder leaves its (stale) file


def test_cli_module_does_not_import_sb3():
    code = (
        "import sys, retro_atari_kit.cli as c; c.build_parser(); "
        "assert 'stable_baselines3' not in sys.modules and 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_device_cuda_without_cuda_is_refused(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run = tmp_path / "r"
    _fails(
        ["train", "ppo", ENV, "--device", "cuda", "--run-dir", str(run)],
        capsys,
        "--device cuda",
        "--device auto",
    )
    assert not run.exists()


def test_final_model_is_a_copy_of_the_last_checkpoint(trained_run):
    steps, last = list_checkpoints(trained_run)[-1]
    assert steps == 256
    final = os.path.join(trained_run, "model.zip")
    # independent files: one damaged write cannot take both
    assert not os.path.samefile(final, last) and open(final, "rb").read() == open(last, "rb").read()


def test_resume_below_the_trained_steps_is_refused(trained_run, capsys):
    config = open(os.path.join(trained_run, "config.yaml")).read()
    _fails(
        ["train", "--resume", trained_run, "--timesteps", "100"],
        capsys,
        "below the 256 steps",
        "larger total",
    )
    assert open(os.path.join(trained_run, "config.yaml")).read() == config


def test_eval_never_falls_back_to_an_older_model_silently(trained_run, tmp_path, capsys):
    run = str(tmp_path / "damaged")
    shutil.copytree(trained_run, run)
    final = os.path.join(run, "model.zip")
    os.remove(final)
    with open(final, "wb") as fh:
        fh.write(b"not a zip")
    newest = checkpoint_path(run, 256)
    _fails(["eval", run, "--episodes", "1"], capsys, "cannot read", final, newest)
    assert main(["eval", newest, "--episodes", "1", "--json"]) == 0  # the named fix works


def test_force_refuses_a_run_dir_being_trained(trained_run, tmp_path, capsys):
    run = str(tmp_path / "busy")
    shutil.copytree(trained_run, run)
    holder = _hold_lock(run)
    try:
        _fails(
            ["train", "ppo", ENV, "--run-dir", run, "--force", *TINY],
            capsys,
            "--force refuses",
            str(holder.pid),
        )
        assert os.path.exists(os.path.join(run, "model.zip"))
    finally:
        holder.kill()
        holder.wait()


def test_a_new_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path, monkeypatch, capsys):
    from retro_atari_kit.integrations.sb3.training import run as sb3_run

    def broken_env(*args, **kwargs):
        raise RuntimeError("emulator failed to start")

    monkeypatch.setattr(sb3_run, "make_train_env", broken_env)
    run = tmp_path / "r"
    with pytest.raises(RuntimeError, match="emulator failed"):
        main(["train", "ppo", ENV, "--timesteps", "64", "--run-dir", str(run), *TINY])
    assert not run.exists()  # no config.yaml, monitor/ or stale .train.pid to block a re-run
    monkeypatch.undo()
    assert main(["train", "ppo", ENV, "--timesteps", "64", "--run-dir", str(run), *TINY]) == 0


@pytest.mark.parametrize("key, flag", sorted(ENGINE_OPTIONS["rllib"].items()))
def test_each_rllib_option_is_one_flag_checked_from_the_one_list(key, flag, tmp_path, capsys):
    """runs.ENGINE_OPTIONS is the one list: the CLI refuses each flag without the engine and with --resume,
    and hands it to the engine under its option name."""
    from retro_atari_kit.cli.train import _engine_options, add_parser

    value = "auto" if key == "address" else "1"
    assert main(["train", "ppo", ENV, flag, value]) == 2
    assert f"{flag} needs --engine rllib" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path), flag, value]) == 2
    assert f"drop {flag} (only --timesteps may change" in capsys.readouterr().err
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["train", "ppo", ENV, "--engine", "rllib", flag, value])
    assert _engine_options(args) == {key: value if key == "address" else 1}
