"""Mistakes in ``retrokit train``: names, options, values, run dirs (both engines; every one refused before
Ray starts)."""

from __future__ import annotations

import pytest

from tests.sweep._checks import says
from tests.sweep._setups import folder, run_copy, text
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


# the same command in tests/cli/test_cli_errors.py, with the message's words: that test is kept, not this case
TRAIN = "retrokit train"
PONG = f"{TRAIN} ppo {ENV}"
QUICK = "--run-dir run --timesteps 64"
MISTAKES = "test_train_mistakes_are_one_line_and_write_nothing"
UNDER_A_FILE = "test_a_run_dir_under_a_file_is_refused"
UNDER_RO = "test_a_run_dir_under_a_read_only_folder_is_refused"
IN_TESTS_CLI = {
    f"{TRAIN} ppo Pong-v0 --engine sb3 {QUICK}": "test_another_packages_id_names_the_kits_id",
    f"{TRAIN} ppo ALE/Pong-v5 --engine sb3 {QUICK}": "test_another_packages_id_names_the_kits_id",
    f"{TRAIN} ppo PongNoFrameskip-v4 --engine sb3 {QUICK}": "test_another_packages_id_names_the_kits_id",
    f"{PONG} --engine sb3 --backend bogus {QUICK}": MISTAKES,
    f"{PONG} --engine rllib --backend bogus {QUICK}": MISTAKES,
    f"{PONG} --engine sb3 --device tpu {QUICK}": MISTAKES,
    f"{PONG} --engine rllib --device tpu {QUICK}": MISTAKES,
    f"{PONG} --engine sb3 --set gamma=2 {QUICK}": MISTAKES,
    f"{PONG} --engine rllib --set gamma=2 {QUICK}": MISTAKES,
    f"{PONG} --engine rllib --env-kwarg backend=bogus {QUICK}": MISTAKES,
    f"{PONG} --engine sb3 --run-dir afile/sub --timesteps 64 [file afile]": UNDER_A_FILE,
    f"{PONG} --set n_steps=0 {QUICK}": MISTAKES,
    f"{PONG} --set gae_lambda=1.5 {QUICK}": MISTAKES,
    f"{PONG} --set clip_range=0 {QUICK}": MISTAKES,
    f"{PONG} --set ent_coef=-0.01 {QUICK}": MISTAKES,
    f"{PONG} --run-dir run --timesteps ''": MISTAKES,
    f"{PONG} --run-dir run --n-envs 2.7 --timesteps 64": MISTAKES,
    f"{PONG} --run-dir run --seed -1 --timesteps 64": MISTAKES,
    f"{PONG} --save-replay-buffer {QUICK}": MISTAKES,
    f"{PONG} --run-dir ro/run --timesteps 64 [folder ro mode 555]": UNDER_RO,
    f"{PONG} --run-dir '' --timesteps 64": MISTAKES,
}


def train_cases() -> list[Case]:
    cases: list[Case] = []
    quick = ["--run-dir", "run", "--timesteps", "64"]

    def train(group: str, *argv: str, needles: tuple[str, ...] = (), **kw) -> None:
        cases.append(Case(group, ["train", *argv], needles=needles, **kw))

    train("train: usage")
    train("train: usage", "ppo")
    train("train: usage", "ppo", ENV, "--bogus-flag")
    train("train: usage", "ppo", ENV, "extra-positional")

    rom = "{missing_rom}"
    for engine in ("sb3", "rllib"):
        eng = ["--engine", engine]
        g = f"train {engine}: names"
        train(g, "bogus", ENV, *eng, *quick, needles=("bogus",))
        train(g, "ppo", "RetroKit/Bogus-v0", *eng, *quick, needles=("RetroKit/Bogus-v0",))
        for other in ("Pong-v0", "ALE/Pong-v5", "PongNoFrameskip-v4"):
            train(g, "ppo", other, *eng, *quick, needles=("use RetroKit/Pong-v0",))
        train(g, "ppo", "CartPole-v1", *eng, *quick)
        train(g, "ppo", "Airstriker-Genesis-v0", *eng, *quick, needles=("RetroKit/Airstriker-Genesis-v0",))
        train(g, "ppo", rom, *eng, *quick, needles=("import-roms",))
        train(g, "ppo", ENV, *eng, "--network", "bogus", *quick, needles=("bogus",))
        train(g, "ppo", ENV, *eng, "--preset", "bogus", *quick, needles=("bogus",))
        train(g, "ppo", ENV, *eng, "--backend", "bogus", *quick, needles=("unknown backend",))
        train(g, "ppo", ENV, *eng, "--env-kwarg", "backend=bogus", *quick)
        train(g, "ppo", ENV, *eng, "--device", "tpu", *quick, needles=("unknown device",))
        train(g, "ppo", ENV, *eng, "--device", "cuda:7", *quick, needles=("cuda:7",))
        train(g, "ppo", ENV, *eng, "--device", "", *quick)
        train(g, "ppo", ENV, *eng, "--set", "bogus_key=1", *quick, needles=("bogus_key",))
        train(g, "ppo", ENV, *eng, "--set", "gamma=2", *quick, needles=("gamma",))
        train(g, "ppo", ENV, *eng, "--timesteps", "abc", "--run-dir", "run", needles=("--timesteps",))
        train(g, "ppo", ENV, *eng, "--n-envs", "0", *quick, needles=("--n-envs",))
        train(g, "ppo", ENV, *eng, "--run-dir", "afile/sub", "--timesteps", "64", setup=[text("afile")])
        train(g, "ppo", ENV, *eng, *quick, setup=[run_copy()], needles=("exists",))

    g = "train: algos per engine"
    train(g, "appo", ENV, *quick, needles=("appo",))
    train(g, "impala", ENV, *quick, needles=("impala",))
    train(g, "qrdqn", ENV, "--engine", "rllib", *quick, needles=("qrdqn",))
    train(g, "a2c", ENV, "--engine", "rllib", *quick, needles=("a2c",))
    for algo in ("ppo", "a2c", "dqn", "qrdqn"):
        train(g, algo, ENV, "--set", "gamma=0", *quick, needles=("gamma",))
        train(g, algo, ENV, "--set", "learning_rate=-1", *quick, needles=("learning_rate",))
        train(g, algo, ENV, "--set", "no_such_key=3", *quick, needles=("no_such_key",))
    for algo in ("appo", "impala", "dqn"):
        train(g, algo, ENV, "--engine", "rllib", "--set", "lr=0", *quick, needles=("lr",))

    g = "train: --set"
    for item, needles in [
        ("gamma", ("gamma",)),
        ("=3", ()),
        ("gamma=", ("gamma",)),
        ("gamma=abc", ("gamma",)),
        ("gamma=.nan", ("gamma",)),
        ("gamma=.inf", ("gamma",)),
        ("gamma=-1", ("gamma",)),
        ("n_steps=0", ("n_steps",)),
        ("n_steps=1.5", ("n_steps",)),
        ("n_steps=[1", ("n_steps",)),
        ("batch_size=-1", ("batch_size",)),
        ("gae_lambda=1.5", ("gae_lambda",)),
        ("clip_range=0", ("clip_range",)),
        ("ent_coef=-0.01", ("ent_coef",)),
        ("n_epochs=0", ("n_epochs",)),
        ("policy_kwargs.net_arch=foo", ()),
        ("env_wrapper=foo", ("env_wrapper",)),
        ("learning_rate=lin_abc", ("learning_rate",)),
    ]:
        train(g, "ppo", ENV, "--set", item, *quick, needles=needles)
    for item in (
        "buffer_size=0",
        "exploration_fraction=2",
        "exploration_final_eps=-0.1",
        "train_freq=0",
        "target_update_interval=0",
        "learning_starts=-1",
        "batch_size=0",
        "train_freq=[0, step]",
    ):
        train(g, "dqn", ENV, "--set", item, *quick, needles=(item.split("=")[0],))

    g = "train: --env-kwarg"
    for item in (
        "crop_score",
        "=1",
        "bogus=1",
        "frame_stack=0",
        "frame_stack=abc",
        "frame_skip=0",
        "noop_max=-1",
        "sticky_actions=2",
        "sticky_actions=abc",
        "screen_size=2",
        "crop_score=[1,2]",
        "render_mode=human",
        "max_episode_steps=0",
    ):
        train(g, "ppo", ENV, "--env-kwarg", item, *quick)
    train(g, "ppo", "RetroKit/Airstriker-Genesis-v0", "--env-kwarg", "bogus=1", *quick, needles=("bogus",))
    train(g, "ppo", "RetroKit/Airstriker-Genesis-v0", "--env-kwarg", "frame_stack=0", *quick)

    g = "train: numbers"
    for flag, values in [
        ("--timesteps", ["0", "-5", "1.5", "nan", "inf", "", "1e"]),
        ("--n-envs", ["-1", "abc", "2.7", "100000"]),
        ("--seed", ["abc", "1.5", "-1", "99999999999"]),
        ("--checkpoint-every", ["-1", "abc", "1.5"]),
        ("--eval-every", ["-1", "abc"]),
        ("--eval-episodes", ["0", "abc"]),
    ]:
        for value in values:
            argv = ["--run-dir", "run", flag, value]
            if flag != "--timesteps":
                argv += ["--timesteps", "64"]
            train(g, "ppo", ENV, *argv, needles=(flag,))
    rl = ["--engine", "rllib"]
    train(g, "ppo", ENV, *rl, "--num-gpus", "-1", *quick, needles=("--num-gpus",))
    train(g, "ppo", ENV, *rl, "--num-gpus", "abc", *quick, needles=("--num-gpus",))
    train(g, "ppo", ENV, *rl, "--num-env-runners", "0", *quick, needles=("--num-env-runners",))
    train(g, "ppo", ENV, *rl, "--envs-per-runner", "0", *quick, needles=("--envs-per-runner",))
    train(g, "ppo", ENV, "--num-env-runners", "2", *quick, needles=("--engine rllib",))
    train(g, "ppo", ENV, "--address", "auto", *quick, needles=("--engine rllib",))
    for algo in ("ppo", "a2c"):  # no replay buffer: the flag would be ignored
        train(g, algo, ENV, "--save-replay-buffer", *quick, needles=("--save-replay-buffer",))

    g = "train: run dir"
    train(g, "ppo", ENV, "--run-dir", "afile", "--timesteps", "64", setup=[text("afile")])
    train(
        g, "ppo", ENV, "--run-dir", "ro/run", "--timesteps", "64", setup=[folder("ro", 0o555)],
        read_only_binds=True, needles=("not writable",),
    )  # fmt: skip
    train(
        g, "ppo", ENV, *rl, "--run-dir", "ro/run", "--timesteps", "64", setup=[folder("ro", 0o555)],
        read_only_binds=True, needles=("not writable",),
    )  # fmt: skip
    train(g, "ppo", ENV, *quick, setup=[text("run/notes.txt")], needles=("exists",))
    train(g, "ppo", ENV, *quick, "--force", setup=[text("run/notes.txt")], needles=("not a retrokit run",))
    train(g, "ppo", ENV, "--run-dir", "", "--timesteps", "64")

    g = "train: a budget too small to learn (trained, after one warning line)"
    trained = {"expect": "clean", "exit_code": 0, "writes_nothing": False}
    train(
        g, "dqn", ENV, "--n-envs", "1", "--set", "buffer_size=1000", *quick, **trained,
        check=says("warning: --timesteps 64 is not more than dqn's learning_starts (100000)"),
    )  # fmt: skip
    train(
        g, "ppo", ENV, "--n-envs", "2", "--set", "batch_size=64", *quick, **trained,
        check=says("warning: --timesteps 64 is less than one ppo rollout (n_steps 128 x 2 envs = 256 steps)"),
    )  # fmt: skip
    rllib = [*rl, "--num-env-runners", "1", "--envs-per-runner", "2", "--set", "rollout_fragment_length=16"]
    batch = ["--set", "train_batch_size_per_learner=128", "--set", "minibatch_size=64"]
    train(
        g, "ppo", ENV, *rllib, *batch, *quick, **trained,
        check=says("warning: --timesteps 64 is less than one ppo train batch (128 steps)", "Ray's own"),
    )  # fmt: skip
    return cases


@pytest.mark.parametrize("case", params(ci_first(without(train_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
