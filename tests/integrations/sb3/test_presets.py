"""Presets: plain data, fresh copies, zoo facts, overrides validated, SB3 kwargs that build real models."""

from __future__ import annotations

import os
import pickle

import gymnasium as gym
import pytest
import yaml
from retro_atari_kit.integrations.sb3 import (
    ChannelsLastRolloutBuffer,
    CompactReplayBuffer,
    ImpalaCNN,
    KitCnnPolicy,
    KitDQNPolicy,
    NatureCNN,
    get_preset,
    list_presets,
)
from retro_atari_kit.integrations.sb3.algorithms import learner_class
from retro_atari_kit.integrations.sb3.fast_ppo import FastPPO
from retro_atari_kit.integrations.sb3.presets import (
    CLASSES,
    apply_overrides,
    format_preset,
    resolve_class,
    schedule,
    to_sb3_kwargs,
)
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
from stable_baselines3.common.vec_env import DummyVecEnv


def test_list_presets():
    names = list_presets()
    assert names["ppo"] == ["default", "bf16", "gpu", "sticky", "breakout-sticky"]
    assert names["a2c"] == ["default", "gpu"]
    assert names["dqn"] == ["default", "gpu", "pong-dqn", "pong-dqn-fast", "pong-dqn-sticky"]
    assert "qrdqn" in names


def test_presets_are_plain_printable_data_and_fresh_copies():
    for algo, names in list_presets().items():
        for name in names:
            p = get_preset(algo, name)
            assert yaml.safe_load(format_preset(p)) == p  # plain data: round-trips through YAML
    a = get_preset("a2c")
    a["policy_kwargs"]["optimizer_kwargs"]["eps"] = 1.0
    assert get_preset("a2c")["policy_kwargs"]["optimizer_kwargs"]["eps"] == 1e-5


def test_zoo_defaults():
    ppo = get_preset("ppo")
    assert (ppo["n_envs"], ppo["n_steps"], ppo["n_epochs"], ppo["batch_size"]) == (8, 128, 4, 256)
    assert (ppo["learning_rate"], ppo["clip_range"]) == ("lin_2.5e-4", "lin_0.1")
    assert (ppo["ent_coef"], ppo["vf_coef"]) == (0.01, 0.5)
    a2c = get_preset("a2c")
    assert (a2c["n_envs"], a2c["ent_coef"], a2c["vf_coef"]) == (16, 0.01, 0.25)
    assert a2c["policy_kwargs"]["optimizer_kwargs"] == {"eps": 1e-5}
    dqn = get_preset("dqn")
    assert (dqn["buffer_size"], dqn["learning_rate"], dqn["learning_starts"]) == (100_000, 1e-4, 100_000)
    assert (dqn["target_update_interval"], dqn["train_freq"]) == (1000, 4)
    assert (dqn["exploration_fraction"], dqn["exploration_final_eps"]) == (0.1, 0.01)
    pong = get_preset("dqn", "pong-dqn")
    assert (pong["buffer_size"], pong["learning_starts"], pong["batch_size"], pong["gamma"]) == (
        100_000,
        10_000,
        32,
        0.99,
    )
    assert (pong["exploration_initial_eps"], pong["exploration_final_eps"]) == (1.0, 0.02)
    assert pong["exploration_fraction"] * pong["n_timesteps"] == 100_000  # epsilon decays over 100k steps
    assert (pong["target_update_interval"], pong["learning_rate"]) == (1000, 1e-4)
    assert pong["n_steps"] == 2 and pong["train_freq"] == 1  # 2-step returns, one update per env step


def test_unknown_algo_or_name_names_the_choices():
    with pytest.raises(KeyError, match="ppo"):
        get_preset("sac")
    with pytest.raises(KeyError, match="pong-dqn"):
        get_preset("dqn", "fast")


def test_schedules():
    lin = schedule("lin_2.5e-4")
    assert lin(1.0) == pytest.approx(2.5e-4) and lin(0.5) == pytest.approx(1.25e-4) and lin(0.0) == 0.0
    d = schedule({"schedule": "linear", "initial": 1.0, "final": 0.5})
    assert d(1.0) == 1.0 and d(0.0) == 0.5
    # held for the first half of training, then linear to 0: a quarter of the way down at 5/8
    half = schedule({"schedule": "linear", "initial": 2.5e-4, "start_fraction": 0.5})
    assert half(1.0) == half(0.5) == pytest.approx(2.5e-4) and half(0.75) == pytest.approx(2.5e-4)
    assert (
        half(0.375) == pytest.approx(1.875e-4) and half(0.25) == pytest.approx(1.25e-4) and half(0.0) == 0.0
    )
    # a schedule pickled before start_fraction existed (in older models' zips) still falls from the start
    old = pickle.loads(pickle.dumps(lin))
    del old.__dict__["start_fraction"]
    assert old(0.5) == pytest.approx(1.25e-4)
    for bad in (1.0, -0.1, "half"):
        with pytest.raises(ValueError, match="start_fraction|not a number"):
            schedule({"schedule": "linear", "initial": 1.0, "start_fraction": bad})
    assert schedule(3e-4) == 3e-4 and schedule("3e-4") == 3e-4
    with pytest.raises(ValueError, match="lin_"):
        schedule("cosine")


def test_an_ent_coef_schedule_is_for_the_fast_learners():
    falling = {"schedule": "linear", "initial": 0.01, "start_fraction": 0.5}
    fast = to_sb3_kwargs({**get_preset("ppo"), "ent_coef": falling, "fast_learner": True})
    assert fast["ent_coef"](0.75) == pytest.approx(0.01) and fast["ent_coef"](0.25) == pytest.approx(0.005)
    assert to_sb3_kwargs({**get_preset("ppo"), "ent_coef": "0.02"})["ent_coef"] == 0.02
    with pytest.raises(ValueError, match=r"ent_coef: SB3's PPO and A2C take a number; .*fast_learner=true"):
        to_sb3_kwargs({**get_preset("ppo"), "ent_coef": falling})
    with pytest.raises(ValueError, match=r"ent_coef: SB3's PPO and A2C take a number"):
        to_sb3_kwargs({**get_preset("ppo", "sticky"), "fast_learner": False})


def test_overrides_key_by_key_with_validation():
    base = get_preset("ppo")
    got = apply_overrides(
        base, ["n_steps=256", "learning_rate=lin_1e-4", "policy_kwargs.net_arch=[64]"], algo="ppo"
    )
    assert got["n_steps"] == 256 and got["learning_rate"] == "lin_1e-4"
    fused_adam = {"eps": 1e-5, "fused": True}
    assert got["policy_kwargs"] == {"net_arch": [64], "optimizer_kwargs": fused_adam}
    assert base["n_steps"] == 128 and base["policy_kwargs"]["net_arch"] == []  # input untouched
    # a dotted key replaces one nested value and keeps its siblings
    bf16 = get_preset("ppo", "bf16")
    off = apply_overrides(bf16, ["policy_kwargs.features_extractor_kwargs.autocast=null"], algo="ppo")
    assert off["policy_kwargs"] == {
        "net_arch": [],
        "optimizer_kwargs": fused_adam,
        "features_extractor_kwargs": {"autocast": None},
    }
    assert bf16["policy_kwargs"]["features_extractor_kwargs"] == {"autocast": "bf16"}
    assert apply_overrides(base, {"gamma": 0.98}, algo="ppo")["gamma"] == 0.98  # any PPO argument
    with pytest.raises(ValueError, match="unknown hyperparameter 'n_step'.*'n_steps'"):
        apply_overrides(base, ["n_step=5"], algo="ppo")
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(base, ["n_steps"], algo="ppo")
    with pytest.raises(ValueError, match="buffer_size"):
        apply_overrides(base, ["buffer_size=10"], algo="ppo")  # a DQN argument, not PPO's


def test_sb3_kwargs_resolve_classes_and_network():
    kw = to_sb3_kwargs(get_preset("a2c"), network="nature")
    assert "n_envs" not in kw and "n_timesteps" not in kw and kw["policy"] is KitCnnPolicy
    assert kw["policy_kwargs"]["optimizer_class"] is RMSpropTFLike
    assert kw["policy_kwargs"]["features_extractor_class"] is NatureCNN
    dqn = to_sb3_kwargs(get_preset("dqn", "pong-dqn"), network="impala")
    assert dqn["replay_buffer_class"] is CompactReplayBuffer
    assert dqn["policy_kwargs"]["features_extractor_class"] is ImpalaCNN
    assert dqn["policy"] is KitDQNPolicy
    assert to_sb3_kwargs(get_preset("dqn"))["policy"] == "CnnPolicy"  # SB3's alias stays a string
    assert to_sb3_kwargs(get_preset("ppo"))["policy_kwargs"]["features_extractor_class"] is NatureCNN
    mine = to_sb3_kwargs({"policy_kwargs": {"net_arch": []}}, network=None)  # None: policy_kwargs as given
    assert mine == {"policy": "CnnPolicy", "policy_kwargs": {"net_arch": []}}
    with pytest.raises(ValueError, match="impala"):
        to_sb3_kwargs(get_preset("ppo"), network="resnet")


@pytest.mark.parametrize("algo, cls", [("ppo", PPO), ("a2c", A2C), ("dqn", DQN)])
@pytest.mark.parametrize("name", ["default", "gpu"])
def test_every_preset_builds_a_model(algo, cls, name):
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0")])
    try:
        preset = apply_overrides(get_preset(algo, name), {"buffer_size": 1000} if algo == "dqn" else {})
        model = cls(env=venv, device="cpu", **to_sb3_kwargs(preset, network="nature"))
        if algo == "ppo":
            assert model.lr_schedule(1.0) == pytest.approx(2.5e-4)
            assert model.clip_range(0.5) == pytest.approx(0.05)
            # SB3's Adam settings for actor-critic policies, as the fused kernel
            assert model.policy.optimizer.defaults["eps"] == 1e-5 and model.policy.optimizer.defaults["fused"]
        if algo == "dqn":  # torch's Adam defaults, as SB3's DQN, as the fused kernel
            assert model.policy.optimizer.defaults["eps"] == 1e-8 and model.policy.optimizer.defaults["fused"]
        if algo in ("ppo", "a2c"):
            assert isinstance(model.rollout_buffer, ChannelsLastRolloutBuffer)
    finally:
        venv.close()


def test_sticky_preset_builds_a_model_whose_schedules_hold_then_fall():
    preset = get_preset("ppo", "sticky")
    learner, options = learner_class("ppo", preset["fast_learner"])
    assert learner is FastPPO  # the falling entropy bonus is the kit's learner's (SB3's takes a number)
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0")] * 4)  # 4 x 128 steps: one minibatch of 512
    try:
        model = learner(env=venv, device="cpu", **options, **to_sb3_kwargs(preset, network="impala"))
        assert model.batch_size == 512 and isinstance(model.policy.features_extractor, ImpalaCNN)
        assert model.lr_schedule(1.0) == model.lr_schedule(0.5) == pytest.approx(2.5e-4)
        assert model.lr_schedule(0.25) == pytest.approx(1.25e-4) and model.clip_range(0.25) == pytest.approx(
            0.05
        )
        assert model.ent_coef(0.5) == pytest.approx(0.01) and model.ent_coef(0.25) == pytest.approx(0.005)
    finally:
        venv.close()


def test_presets_feed_the_training_cli_resolution():
    from retro_atari_kit.integrations.sb3.training import algo_kwargs, resolve_config

    from retro_atari_kit.runs import TrainSpec

    cfg = resolve_config(TrainSpec(algo="dqn", env_id="RetroKit/Pong-v0", preset="pong-dqn"))
    assert cfg["hyperparams"]["learning_starts"] == 10_000 and cfg["engine"] == "sb3"
    assert algo_kwargs(cfg)["replay_buffer_class"] is CompactReplayBuffer
    # the preset's one env (n_envs sets the updates per env step), whatever the CPU count
    assert cfg["n_envs"] == 1
    assert algo_kwargs(cfg)["replay_buffer_kwargs"] == {"n_steps": 2, "gamma": 0.99}
    # on-policy: one env per CPU for the zoo's shape; a preset tuned at envs of its own keeps them
    ppo = resolve_config(TrainSpec(algo="ppo", env_id="RetroKit/Pong-v0"))
    assert ppo["n_envs"] == (os.cpu_count() or 1) and ppo["preset_n_envs"] == 8
    sticky = resolve_config(TrainSpec(algo="ppo", env_id="RetroKit/Pong-v0", preset="sticky"))
    assert sticky["n_envs"] == 16 and algo_kwargs(sticky)["learning_rate"](0.75) == pytest.approx(2.5e-4)
    mine = resolve_config(TrainSpec(algo="ppo", env_id="RetroKit/Pong-v0", preset="sticky", n_envs=4))
    assert mine["n_envs"] == 4


def committed_config(run: str) -> dict:
    """The config.yaml of a committed run under ``results/``."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "results", run, "config.yaml")) as f:
        return yaml.safe_load(f)


def test_sticky_preset_is_the_committed_falling_entropy_runs_recipe():
    """``sticky`` resolves to exactly the hyperparameters of its two committed seeds, trained with ``--set``
    on the preset before the falling entropy bonus became its default, and of the run trained on it as it
    ships with ``--timesteps 1.5e6`` (its schedules are fractions of the run; docs/results.md)."""
    from retro_atari_kit.integrations.sb3.training import resolve_config

    from retro_atari_kit.runs import TrainSpec

    preset = resolve_config(
        TrainSpec(algo="ppo", env_id="RetroKit/Pong-v0", preset="sticky", network="impala")
    )
    for run in ("pong-ppo-sticky-entfall-1", "pong-ppo-sticky-entfall-2", "pong-ppo-sticky-1p5m-1"):
        committed = committed_config(run)
        assert preset["hyperparams"] == committed["hyperparams"], run
        assert preset["n_envs"] == committed["n_envs"] == 16


def test_breakout_sticky_preset_is_the_committed_runs_recipe():
    """``breakout-sticky`` resolves to exactly the hyperparameters of the committed run that met the Breakout
    goal under Machado's protocol (docs/results.md), which was trained with ``--set`` on ``default``."""
    from retro_atari_kit.integrations.sb3.training import algo_kwargs, resolve_config

    from retro_atari_kit.runs import TrainSpec

    committed = committed_config("breakout-ppo-sticky-lr5e-4-0")
    spec = TrainSpec(algo="ppo", env_id="RetroKit/Breakout-v0", preset="breakout-sticky")
    preset = resolve_config(spec)
    assert preset["hyperparams"] == committed["hyperparams"]
    # constant: the same at the start and the end of any --timesteps
    assert (algo_kwargs(preset)["learning_rate"], algo_kwargs(preset)["clip_range"]) == (5e-4, 0.1)
    # the zoo's shape, so one env per CPU unless --n-envs: the run's 8 are given on its command line
    assert preset["preset_n_envs"] == committed["n_envs"] == 8 and preset["n_envs"] == (os.cpu_count() or 1)


def test_pong_dqn_sticky_preset_is_the_committed_runs_recipe():
    """``pong-dqn-sticky`` resolves to exactly the hyperparameters and budget of the committed sticky DQN
    run (docs/results.md), trained with ``--set`` on ``pong-dqn``; its learning rate holds, then falls."""
    from retro_atari_kit.integrations.sb3.training import resolve_config

    from retro_atari_kit.runs import TrainSpec

    committed = committed_config("pong-dqn-sticky-1m-0")
    preset = resolve_config(TrainSpec(algo="dqn", env_id="RetroKit/Pong-v0", preset="pong-dqn-sticky"))
    assert preset["hyperparams"] == committed["hyperparams"]
    assert preset["timesteps"] == committed["timesteps"] == 1_000_000 and preset["n_envs"] == 1
    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-v0")])
    try:
        hp = apply_overrides(get_preset("dqn", "pong-dqn-sticky"), {"buffer_size": 1000})
        model = DQN(env=venv, device="cpu", **to_sb3_kwargs(hp, network="nature"))
        assert model.lr_schedule(1.0) == model.lr_schedule(0.5) == pytest.approx(1e-4)
        assert model.lr_schedule(0.25) == pytest.approx(0.5e-4)
        assert isinstance(model.replay_buffer, CompactReplayBuffer)
    finally:
        venv.close()


def test_one_table_maps_the_presets_class_names_to_sb3_classes():
    resolved = {key: {name: resolve_class(key, name) for name in names} for key, names in CLASSES.items()}
    assert resolved == {
        "policy": {"kit-cnn": KitCnnPolicy, "kit-dqn": KitDQNPolicy},
        "replay_buffer_class": {"compact": CompactReplayBuffer},
        "rollout_buffer_class": {"channels-last": ChannelsLastRolloutBuffer},
        "optimizer_class": {"rmsprop-tf-like": RMSpropTFLike},
    }
    # every preset's classes resolve (the YAML names them, the table knows them)
    for algo, names in list_presets().items():
        for name in names:
            kw = to_sb3_kwargs(get_preset(algo, name))
            for key in ("replay_buffer_class", "rollout_buffer_class"):
                assert isinstance(kw.get(key, type), type), (algo, name, key)
            assert kw["policy"] == "CnnPolicy" or isinstance(kw["policy"], type), (algo, name)
            assert isinstance(kw["policy_kwargs"].get("optimizer_class", type), type), (algo, name)


def test_dotted_class_paths_still_work_for_set_and_for_older_run_configs():
    dotted = {
        "policy": "retro_atari_kit.integrations.sb3.policies.KitDQNPolicy",
        "replay_buffer_class": "retro_atari_kit.integrations.sb3.buffers.CompactReplayBuffer",
        "policy_kwargs": {"optimizer_class": "torch.optim.RMSprop", "activation_fn": "torch.nn.ReLU"},
    }
    kw = to_sb3_kwargs(dotted)
    assert kw["policy"] is KitDQNPolicy and kw["replay_buffer_class"] is CompactReplayBuffer
    import torch

    assert kw["policy_kwargs"]["optimizer_class"] is torch.optim.RMSprop
    assert kw["policy_kwargs"]["activation_fn"] is torch.nn.ReLU
    assert resolve_class("replay_buffer_class", CompactReplayBuffer) is CompactReplayBuffer  # a class as is
    assert resolve_class("policy", "MlpPolicy") == "MlpPolicy"  # SB3's alias, for SB3 to resolve


def test_an_unknown_class_name_names_the_choices():
    with pytest.raises(
        ValueError, match=r"replay_buffer_class='compakt' is not a class name; use 'compact' or"
    ):
        resolve_class("replay_buffer_class", "compakt")
    with pytest.raises(ValueError, match=r"rollout_buffer_class: cannot import 'no_such\.Buffer'"):
        resolve_class("rollout_buffer_class", "no_such.Buffer")
    from retro_atari_kit.integrations.sb3.training import resolve_config
    from retro_atari_kit.integrations.sb3.training.config import algo_kwargs

    from retro_atari_kit.runs import RunError, TrainSpec

    spec = TrainSpec(algo="dqn", env_id="RetroKit/Pong-v0", overrides={"replay_buffer_class": "compakt"})
    with pytest.raises(RunError, match=r"^--set replay_buffer_class='compakt' is not a class name"):
        algo_kwargs(resolve_config(spec))


def test_the_zoo_module_resolves_class_names_through_the_one_sb3_table():
    from retro_atari_kit.integrations import zoo
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    assert zoo.resolve_class is resolve_class and not hasattr(zoo, "CLASSES")
    a2c = zoo.hyperparams_for_all("a2c")["RetroKit/Pong-v0"]
    assert a2c["policy_kwargs"]["optimizer_class"] is RMSpropTFLike


@pytest.mark.parametrize(
    "value",
    [
        "compact",
        "retro_atari_kit.integrations.sb3.buffers.CompactReplayBuffer",
        CompactReplayBuffer,
    ],
)
def test_memory_estimate_knows_the_compact_buffer_by_name_path_or_class(value):
    from retro_atari_kit.integrations.sb3.training.memory import estimate_memory

    space = gym.spaces.Box(0, 255, (4, 84, 84), "uint8")
    config = {"algo": "dqn", "n_envs": 1, "hyperparams": {"buffer_size": 1000, "replay_buffer_class": value}}
    assert estimate_memory(config, space)["replay buffer"] == 1000 * (84 * 84 + 16)  # one frame each
    config["hyperparams"].pop("replay_buffer_class")
    assert estimate_memory(config, space)["replay buffer"] == 1000 * (2 * 4 * 84 * 84 + 16)  # SB3's


def test_a_run_whose_config_names_classes_by_dotted_path_still_resumes(tmp_path, capsys):
    """config.yaml of runs made before the presets named classes: dotted paths, as pong-dqn wrote them."""
    from retro_atari_kit.cli import main
    from retro_atari_kit.runs import load_config, write_config

    run = str(tmp_path / "dqn")
    argv = ["train", "dqn", "RetroKit/Pong-v0", "--preset", "pong-dqn", "--timesteps", "64"]
    argv += ["--run-dir", run, "--set", "buffer_size=500", "--set", "learning_starts=32"]
    assert main([*argv, "--checkpoint-every", "32", "--save-replay-buffer"]) == 0
    config = load_config(run)
    assert (config["hyperparams"]["policy"], config["hyperparams"]["replay_buffer_class"]) == (
        "kit-dqn",
        "compact",
    )
    config["hyperparams"]["policy"] = "retro_atari_kit.integrations.sb3.policies.KitDQNPolicy"
    config["hyperparams"]["replay_buffer_class"] = (
        "retro_atari_kit.integrations.sb3.buffers.CompactReplayBuffer"
    )
    write_config(run, config)
    capsys.readouterr()
    assert main(["train", "--resume", run, "--timesteps", "96"]) == 0
    out = capsys.readouterr().out
    assert "replay buffer restored" in out and "resuming from" in out
    model = DQN.load(f"{run}/model.zip", device="cpu")
    assert type(model.policy) is KitDQNPolicy and model.num_timesteps == 96
    assert load_config(run)["hyperparams"]["replay_buffer_class"].endswith(".CompactReplayBuffer")
