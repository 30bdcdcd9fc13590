"""``retrokit train --protocol``: a run trains under the protocol's settings of play (its action set
aside: the minimal one), records the protocol in config.yaml, and ``retrokit eval`` plays it under that
protocol unless told otherwise; ``--protocol training`` evaluates it on the default stack. A protocol that
cannot apply (a stable-retro game, an env kwarg it contradicts, a resumed run) is one line and no run dir."""

from __future__ import annotations

import json
import os

import gymnasium as gym
import pytest
import yaml

from retro_atari_kit.cli import main
from retro_atari_kit.registration import make_env
from tests.cli._run import ENV, one_error_line, retrokit

MACHADO_TRAINING = {
    "sticky_actions": 0.25,
    "terminal_on_life_loss": False,
    "noop_max": 0,
    "max_episode_steps": None,
}
TINY = ["--timesteps", "64", "--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32"]


@pytest.fixture(scope="module")
def machado_run(tmp_path_factory) -> str:
    run = str(tmp_path_factory.mktemp("protocol") / "pong-machado")
    res = retrokit(
        "train", "ppo", ENV, "--protocol", "machado", *TINY, "--run-dir", run, cwd=os.path.dirname(run)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return run


def load_json(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_the_run_records_the_protocol_and_trains_sticky_on_the_minimal_actions(machado_run):
    with open(os.path.join(machado_run, "config.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    assert config["protocol"] == "machado"
    assert config["env_kwargs"] == MACHADO_TRAINING  # every engine builds its envs from these
    keys = list(config)
    assert keys.index("protocol") == keys.index("env_kwargs") - 1
    env = make_env(config["env_id"], **config["env_kwargs"])
    try:
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
        assert env.action_space == gym.spaces.Discrete(6)  # Pong's minimal set
    finally:
        env.close()


def test_eval_plays_the_trained_protocol_unless_told(machado_run, tmp_path, capsys):
    out = str(tmp_path / "evals")
    assert main(["eval", machado_run, "--episodes", "1", "--seed", "3", "--out", out]) == 0
    assert "protocol machado" in capsys.readouterr().err
    record = load_json(os.path.join(out, "pong-machado.machado.json"))
    assert record["train_protocol"] == "machado" and record["protocol"]["protocol"] == "machado"
    assert record["env_kwargs"] == {**MACHADO_TRAINING, "full_action_space": True}
    assert record["action_map"] == [0, 1, 3, 4, 11, 12]  # the minimal-action policy in the full set

    # --protocol training: the default stack, without what the run's protocol set
    assert main(["eval", machado_run, "--episodes", "1", "--protocol", "training", "--out", out]) == 0
    record = load_json(os.path.join(out, "pong-machado.training.json"))
    assert record["env_kwargs"] == {} and record["train_protocol"] == "machado" and "action_map" not in record
    assert record["train_env_kwargs"] == MACHADO_TRAINING  # what the run trained on, whatever eval played

    # an env kwarg given to eval goes over the run's own, under the training protocol too
    argv = ["eval", machado_run, "--episodes", "1", "--protocol", "training", "--env-kwarg", "noop_max=5"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["protocol"]["protocol"] == "training"


def test_report_names_the_protocol_an_agent_trained_under(machado_run, tmp_path):
    from retro_atari_kit.evaluation.report import default_label

    record = {"algo": "ppo", "network": "nature", "engine": "sb3", "run": "r"}
    assert default_label(record) == "PPO nature"
    assert default_label({**record, "train_protocol": "training"}) == "PPO nature"
    assert default_label({**record, "train_protocol": "machado"}) == "PPO nature, trained machado"
    assert default_label({**record, "engine": "rllib", "train_protocol": "machado"}) == (
        "PPO nature (RLlib), trained machado"
    )
    # sticky actions of the run's own (the training protocol with --env-kwarg sticky_actions=0.25): not
    # pooled with the agents of the default stack
    sticky = {**record, "train_protocol": "training", "train_env_kwargs": {"sticky_actions": 0.25}}
    assert default_label(sticky) == "PPO nature, trained sticky"
    assert default_label({**sticky, "train_env_kwargs": {"sticky_actions": 0.0}}) == "PPO nature"
    assert default_label({**sticky, "train_protocol": "machado"}) == "PPO nature, trained machado"


@pytest.mark.parametrize(
    "args, needles",
    [
        (
            ["ppo", ENV, "--protocol", "machado", "--env-kwarg", "noop_max=30"],
            ("--protocol machado sets noop_max=0", "drop --env-kwarg noop_max=30"),
        ),
        (
            ["ppo", "RetroKit/Airstriker-Genesis-v0", "--protocol", "nature"],
            ("the nature protocol is defined for ALE games", "use --protocol training"),
        ),
        (["ppo", ENV, "--protocol", "sticky"], ("--protocol", "invalid choice: 'sticky'")),
    ],
    ids=["contradicting-env-kwarg", "stable-retro", "unknown"],
)
def test_a_protocol_that_cannot_apply_is_one_line_and_no_run_dir(tmp_path, args, needles):
    res = retrokit("train", *args, *TINY, "--run-dir", str(tmp_path / "r"), cwd=tmp_path)
    one_error_line(res, *needles)
    assert not (tmp_path / "r").exists()


def test_resume_keeps_the_recorded_protocol(machado_run, tmp_path):
    res = retrokit("train", "--resume", machado_run, "--protocol", "training", cwd=tmp_path)
    one_error_line(res, "drop --protocol")


def test_a_damaged_protocol_in_config_is_named_on_resume_and_eval(machado_run, tmp_path):
    import shutil

    run = str(tmp_path / "copy")
    shutil.copytree(machado_run, run)
    path = os.path.join(run, "config.yaml")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("protocol: machado", "protocol: sticky"))
    res = retrokit("train", "--resume", run, "--timesteps", "128", cwd=tmp_path)
    one_error_line(res, "config.yaml: protocol: unknown protocol 'sticky'")
    res = retrokit("eval", run, "--episodes", "1", cwd=tmp_path)
    one_error_line(res, "unknown protocol 'sticky'")
