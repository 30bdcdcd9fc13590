"""``retrokit train``'s options come from one definition, ``runs.TrainSpec`` (defaults, kinds, help)."""

from __future__ import annotations

import dataclasses

import pytest

from retro_atari_kit.cli import build_parser, main
from retro_atari_kit.cli.train import RECORDED_OPTIONS, _spec_values
from retro_atari_kit.runs import ENGINE_OPTIONS, TrainSpec
from retro_atari_kit.runs.spec import ENGINE_OPTION_SPECS, option_flag_for_setting, spec_options


def _args(*argv: str):
    return build_parser().parse_args(["train", *argv])


def test_no_options_give_the_specs_defaults():
    values = _spec_values(_args("PPO", "RetroKit/Pong-v0"))
    expected = dataclasses.asdict(TrainSpec(algo="ppo", env_id="RetroKit/Pong-v0"))
    expected.pop("command"), expected.pop("engine_options")
    assert values == expected


def test_every_option_is_parsed_by_its_kind():
    values = _spec_values(
        _args(
            *("ppo", "RetroKit/Pong-v0", "--network", "Impala", "--timesteps", "2.5e5", "--n-envs", "4"),
            *("--seed", "7", "--set", "n_steps=64", "--env-kwarg", "crop_score=true", "--eval-every", "1e4"),
            *("--checkpoint-every", "0", "--save-replay-buffer", "--backend", "inprocess"),
        )
    )
    assert values["network"] == "impala" and values["timesteps"] == 250_000 and values["n_envs"] == 4
    assert values["seed"] == 7 and values["overrides"] == {"n_steps": 64}
    assert values["env_kwargs"] == {"crop_score": True} and values["eval_every"] == 10_000
    assert values["checkpoint_every"] == 0 and values["save_replay_buffer"] is True
    assert values["backend"] == "inprocess"


def test_help_lists_every_option_with_its_default_and_the_algorithms(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, (option, default) in spec_options().items():
        if option.flag:
            assert option.flag in text, name
            if default not in (None, {}, False):
                shown = f"{default:_}" if isinstance(default, int) else str(default)
                assert f"(default: {shown})" in text, name
    for flags in ENGINE_OPTIONS.values():
        assert all(flag in text for flag in flags.values())
    assert "a2c, dqn, ppo, qrdqn" in text and "--engine rllib: ppo, appo, impala, dqn" in text


def test_resume_refuses_exactly_the_recorded_options():
    recorded = {dest for dest, (option, _) in spec_options().items() if option.flag and option.recorded}
    assert "timesteps" not in recorded  # --resume may set a new total
    assert recorded | {"force"} | {
        f.lstrip("-").replace("-", "_") for f in ENGINE_OPTIONS["rllib"].values()
    } == set(RECORDED_OPTIONS)
    assert set(ENGINE_OPTIONS["rllib"]) == set(ENGINE_OPTION_SPECS["rllib"])


@pytest.mark.parametrize(
    "key, flag",
    [("seed", "--seed"), ("n_envs", "--n-envs"), ("n_timesteps", "--timesteps"), ("num_gpus", "--num-gpus")],
)
def test_set_refuses_keys_an_option_owns(key, flag, capsys, tmp_path):
    assert option_flag_for_setting(key) == flag
    run = tmp_path / "run"
    assert main(["train", "ppo", "RetroKit/Pong-v0", "--set", f"{key}=3", "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"use {flag}" in err
    assert not run.exists()
    assert (
        option_flag_for_setting("n_steps") is None
        and option_flag_for_setting("policy_kwargs.net_arch") is None
    )
