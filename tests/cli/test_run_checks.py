"""The run layer's one new-run check and one resume check: the env is built once before training,
an edited ``config.yaml`` is honoured or refused (never ignored), and a refused resume changes nothing in the
run dir, not even the leftovers of a write cut short. Real ALE envs, real SB3 PPO steps."""

from __future__ import annotations

import os

import gymnasium as gym
import pytest
import yaml
from retro_atari_kit.integrations.sb3.training.models import load_model
from retro_atari_kit.integrations.sb3.training.rules import load_hyperparams

from retro_atari_kit.cli import main
from retro_atari_kit.runs import RunError, TrainSpec
from retro_atari_kit.runs.engine import ENGINE_REGISTRY, EngineEntry, load_engine
from retro_atari_kit.runs.resume import prepare_resume
from retro_atari_kit.runs.startup import prepare_new_run

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"


def _edit(run: str, change) -> None:
    path = os.path.join(run, "config.yaml")
    with open(path, encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    change(config)
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh, sort_keys=False)


class _CountingMake:
    """Counts the envs gymnasium builds (the real ones are built: nothing is replaced)."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = gym.make

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)


def test_new_run_builds_the_env_once_before_training(tmp_path, monkeypatch):
    counter = _CountingMake()
    monkeypatch.setattr(gym, "make", counter)
    spec = TrainSpec(algo="ppo", env_id=ENV, run_dir=str(tmp_path / "r"), n_envs=1, timesteps=64)
    config, run_dir = prepare_new_run(spec, out=lambda line: None)
    assert counter.calls == 1  # the probe that checks kwargs and ROM; the model is checked on it
    assert os.path.isfile(os.path.join(run_dir, "config.yaml")) and config["env_id"] == ENV


def test_resume_builds_the_env_once_before_training(run_copy, monkeypatch):
    run = run_copy
    counter = _CountingMake()
    monkeypatch.setattr(gym, "make", counter)
    prepare_resume(run, out=lambda line: None)
    assert counter.calls == 1


def test_a_new_run_refused_by_the_engine_writes_nothing(tmp_path):
    spec = TrainSpec(algo="ppo", env_id=ENV, run_dir=str(tmp_path / "r"), n_envs=1, overrides={"n_steps": 1})
    with pytest.raises(RunError, match="cannot build ppo"):
        prepare_new_run(spec, out=lambda line: None)
    assert not os.path.exists(tmp_path / "r")


def test_the_run_layer_takes_the_rules_of_the_engine_a_run_names_rllib_here(tmp_path):
    """One descent: the run layer finds the engine in its one table and calls down into its RULES (here
    RLlib's, which start no Ray); no engine module is called to prepare."""
    spec = TrainSpec(algo="appo", env_id=ENV, engine="rllib", run_dir=str(tmp_path / "r"), timesteps=64,
                     engine_options={"num_env_runners": 1})  # fmt: skip
    config, run_dir = prepare_new_run(spec, out=lambda line: None)
    assert config["engine"] == "rllib" and config["rllib"]["num_env_runners"] == 1
    assert load_engine("rllib").RULES.name == "rllib" and load_engine("sb3").RULES.name == "sb3"


def test_an_engine_the_run_names_but_no_table_has_is_one_line(run_copy, monkeypatch, snapshot):
    _edit(run_copy, lambda c: c.update(engine="tf"))
    before = snapshot(run_copy)
    with pytest.raises(RunError, match=r"^unknown engine 'tf'; choose one of sb3, rllib$"):
        prepare_resume(run_copy, out=lambda line: None)
    assert snapshot(run_copy) == before
    # an engine whose module cannot be imported: the package to install, in one line (a real failed import)
    monkeypatch.setitem(
        ENGINE_REGISTRY, "ghost", EngineEntry("retrokit_ghost_engine.training", "pip install x")
    )
    with pytest.raises(RunError, match=r"^the ghost engine needs .* missing \(retrokit_ghost_engine\): pip"):
        load_engine("ghost")


def test_edited_hyperparameters_are_honoured_on_resume(run_copy):
    run = run_copy
    _edit(run, lambda c: c["hyperparams"].update(ent_coef=0.05, n_epochs=2, learning_rate=1e-4))
    config, _, checkpoint = prepare_resume(run, out=lambda line: None)
    model = load_model(checkpoint, algo="ppo", device="cpu", overrides=load_hyperparams(config))
    assert model.ent_coef == 0.05 and model.n_epochs == 2
    assert model.lr_schedule(1.0) == pytest.approx(1e-4)
    assert main(["train", "--resume", run, "--timesteps", "96"]) == 0  # and it trains with them


def test_edited_network_is_refused_and_nothing_changes(run_copy, capsys, snapshot):
    run = run_copy
    _edit(run, lambda c: c["hyperparams"]["policy_kwargs"].update(net_arch=[64]))
    # a zip whose write was cut short: a resume that goes on removes it, a refused one must not
    with open(os.path.join(run, "checkpoints", "model_96_steps.zip"), "wb") as fh:
        fh.write(b"PK\x03\x04 cut short")
    before = snapshot(run)
    assert main(["train", "--resume", run]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "hyperparams.policy_kwargs.net_arch is [64]" in err and "was built with []" in err, err
    assert snapshot(run) == before


def test_cut_short_checkpoint_removed_only_when_the_resume_goes_on(run_copy, capsys):
    run = run_copy
    cut = os.path.join(run, "checkpoints", "model_96_steps.zip")
    with open(cut, "wb") as fh:
        fh.write(b"PK\x03\x04 cut short")
    config, _, checkpoint = prepare_resume(run, out=print)
    assert checkpoint.endswith("model_64_steps.zip") and not os.path.exists(cut)
    assert f"removed {cut}" in capsys.readouterr().out


def test_edited_env_is_refused_before_anything_is_written(run_copy, capsys, snapshot):
    run = run_copy
    _edit(run, lambda c: c["env_kwargs"].update(frame_stack=2))
    before = snapshot(run)
    assert main(["train", "--resume", run, "--timesteps", "128"]) == 2
    err = capsys.readouterr().err
    assert "was trained on observations (4, 84, 84) uint8" in err and "(2, 84, 84) uint8" in err, err
    assert snapshot(run) == before


def test_edited_network_field_is_refused_naming_it(run_copy, capsys, snapshot):
    run = run_copy
    _edit(run, lambda c: c.update(network="impala"))
    before = snapshot(run)
    assert main(["train", "--resume", run]) == 2
    err = capsys.readouterr().err.strip()
    assert "says network 'impala'" in err and "holds a nature CNN; put network: nature back" in err, err
    assert snapshot(run) == before
