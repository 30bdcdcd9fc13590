"""Presets as data: one YAML file per algorithm, rl-zoo3's numbers once, one override rule."""

from __future__ import annotations

import pytest

from retro_atari_kit.presets import (
    ALGORITHMS,
    PresetError,
    apply_overrides,
    get_preset,
    list_presets,
    parse_overrides,
    zoo_hyperparams,
)


def test_every_algorithm_has_a_file_and_a_default():
    assert ALGORITHMS == ("a2c", "dqn", "ppo", "qrdqn")
    assert all("default" in names for names in list_presets().values())


def test_presets_inherit_from_the_zoo_numbers():
    zoo = zoo_hyperparams("ppo")
    assert (zoo["n_steps"], zoo["batch_size"], zoo["learning_rate"]) == (128, 256, "lin_2.5e-4")
    default, gpu = get_preset("ppo"), get_preset("ppo", "gpu")
    assert {k: default[k] for k in zoo if k != "policy"} == {k: v for k, v in zoo.items() if k != "policy"}
    assert (gpu["n_envs"], gpu["batch_size"], gpu["n_steps"]) == (32, 256, 32)  # base: default, then set
    assert gpu["fast_learner"] == {"compile": "auto", "cuda_graphs": "auto"}
    assert gpu["policy_kwargs"] == default["policy_kwargs"]
    pong = get_preset("dqn", "pong-dqn")
    assert pong["replay_buffer_class"] == "compact"  # from its base, the default
    assert "replay_buffer_class" not in zoo_hyperparams("dqn")  # the zoo's numbers stay the zoo's


def test_the_data_names_classes_by_engine_neutral_names_not_module_paths():
    """Each engine maps the names to its own classes (for SB3: integrations/sb3/presets.CLASSES)."""
    named = {}
    for algo, names in list_presets().items():
        for entry in [zoo_hyperparams(algo), *(get_preset(algo, name) for name in names)]:
            classes = {k: v for k, v in entry.items() if k == "policy" or k.endswith("_class")}
            pk = entry.get("policy_kwargs", {})
            classes.update({k: v for k, v in pk.items() if k.endswith("_class") or k == "activation_fn"})
            for key, value in classes.items():
                assert isinstance(value, str) and "." not in value, (algo, key, value)
                named.setdefault(key, set()).add(value)
    assert named == {
        "policy": {"CnnPolicy", "kit-cnn", "kit-dqn"},
        "rollout_buffer_class": {"channels-last"},
        "replay_buffer_class": {"compact"},
        "optimizer_class": {"rmsprop-tf-like"},
    }
    assert zoo_hyperparams("a2c")["policy_kwargs"] == {
        "optimizer_class": "rmsprop-tf-like",  # rl-zoo3's RMSpropTFLike, by name
        "optimizer_kwargs": {"eps": 1e-5},
    }


def test_one_override_rule():
    items = parse_overrides(["n_steps=256", "policy_kwargs.optimizer_kwargs.eps=1e-4", "x=[1, 2]", "y="])
    assert items == {"n_steps": 256, "policy_kwargs.optimizer_kwargs.eps": 1e-4, "x": [1, 2], "y": None}
    base = {"policy_kwargs": {"net_arch": [], "optimizer_kwargs": {"eps": 1e-5, "fused": True}}}
    out = apply_overrides(base, {"policy_kwargs.optimizer_kwargs.eps": 1e-4})
    assert out["policy_kwargs"] == {"net_arch": [], "optimizer_kwargs": {"eps": 1e-4, "fused": True}}
    merged = apply_overrides(base, {"policy_kwargs": {"net_arch": [64]}})  # a dict merges into a dict
    assert merged["policy_kwargs"]["net_arch"] == [64] and merged["policy_kwargs"]["optimizer_kwargs"]
    assert base["policy_kwargs"]["optimizer_kwargs"]["eps"] == 1e-5  # input untouched
    with pytest.raises(PresetError, match="unknown hyperparameter 'n_step'; did you mean 'n_steps'"):
        apply_overrides({"n_steps": 1}, {"n_step": 2}, allowed={"n_steps"})
    with pytest.raises(PresetError, match="key=value"):
        parse_overrides(["n_steps"])
    with pytest.raises(PresetError, match="unknown preset 'fast' for dqn; choose one of"):
        get_preset("dqn", "fast")
    with pytest.raises(KeyError):
        get_preset("sac")


def test_engine_presets_live_in_the_core_too():
    from retro_atari_kit.presets import engine_presets

    rllib = engine_presets("rllib")
    assert set(rllib) == {"ppo", "appo", "impala", "dqn"} and rllib["ppo"]["default"]["clip_param"] == 0.1
    rllib["ppo"]["default"]["clip_param"] = 9.0
    assert engine_presets("rllib")["ppo"]["default"]["clip_param"] == 0.1  # fresh copies
    with pytest.raises(PresetError, match="no presets for engine 'tf'"):
        engine_presets("tf")
