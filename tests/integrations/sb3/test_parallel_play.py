"""Parallel play: real ALE envs in a real play process, real SB3 DQN updates in the trainer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import torch
from retro_atari_kit.integrations.sb3 import make_vec_env
from retro_atari_kit.integrations.sb3.parallel_play import (
    PlayerDiedError,
    PlayProcessVecEnv,
    make_play_env,
    parallel_play_class,
    parse_options,
)
from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset, to_sb3_kwargs
from retro_atari_kit.integrations.sb3.training import algo_kwargs, resolve_config
from stable_baselines3 import DQN

from retro_atari_kit.runs import RunError, TrainSpec, list_checkpoints

pytestmark = pytest.mark.slow

PONG = "RetroKit/Pong-v0"


def _kwargs(**overrides) -> dict:
    preset = apply_overrides(get_preset("dqn", "pong-dqn"), {"buffer_size": 2000, **overrides})
    return to_sb3_kwargs(preset, network="nature")


def _flat_state(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).float() for t in module.state_dict().values()])


def _samples(model) -> dict[str, np.ndarray]:
    rb = model.replay_buffer
    batch = rb._get_samples(np.arange(rb.pos))  # every stored transition, stacks rebuilt
    return {name: getattr(batch, name).numpy() for name in batch._fields if getattr(batch, name) is not None}


def test_same_transitions_as_the_synchronous_loop():
    # Frozen network (no gradient steps), a fixed seed, epsilon from 1.0 to 0.3: random and greedy actions.
    # Breakout: life losses end training episodes often, so dones, resets and terminal frames are covered.
    env_id, steps = "RetroKit/Breakout-v0", 400
    kw = _kwargs(learning_starts=50, gradient_steps=0, exploration_fraction=0.5, exploration_final_eps=0.3)
    venv = make_vec_env(env_id, n_envs=1, seed=3)
    sync = DQN(env=venv, seed=3, device="cpu", **kw)
    sync.learn(steps)
    venv.close()
    play = make_play_env(env_id, n_envs=1, seed=3)
    try:
        par = parallel_play_class(DQN)(env=play, seed=3, device="cpu", **kw)
        par.learn(steps)
    finally:
        play.close()
    a, b = _samples(sync), _samples(par)
    assert sync.replay_buffer.pos == par.replay_buffer.pos == steps
    assert a.keys() == b.keys() and {"observations", "actions", "rewards", "dones"} <= a.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert a["dones"].sum() >= 3 and a["rewards"].sum() >= 1  # the run did cover episode ends and rewards
    assert len(np.unique(a["actions"])) == 4
    assert [e["r"] for e in sync.ep_info_buffer] == [e["r"] for e in par.ep_info_buffer]


@pytest.fixture(scope="module")
def trained_pair():
    """The synchronous and the parallel loop, same seed and hyperparameters, with real updates."""
    kw = _kwargs(
        learning_starts=64,
        train_freq=4,
        gradient_steps=2,
        batch_size=8,
        learning_rate=1e-3,
        target_update_interval=50,
    )
    venv = make_vec_env(PONG, n_envs=1, seed=0)
    sync = DQN(env=venv, seed=0, device="cpu", **kw)
    sync.learn(301)
    venv.close()
    play = make_play_env(PONG, n_envs=1, seed=0)
    try:
        par = parallel_play_class(DQN)(env=play, seed=0, device="cpu", **kw)
        initial = _flat_state(par.q_net).clone()
        par.learn(301)
        player = play.player_weights()
    finally:
        play.close()
    return sync, par, initial, player


def test_updates_per_env_step_equal_the_synchronous_loop(trained_pair):
    sync, par, _, _ = trained_pair
    assert par.num_timesteps == sync.num_timesteps == 304  # whole rounds of train_freq 4, as SB3
    # updates after every 4 steps past learning_starts 64, 2 each: (304 - 64) / 4 * 2
    assert par._n_updates == sync._n_updates == 120
    assert par.exploration_rate == sync.exploration_rate


def test_play_never_runs_further_ahead_than_the_bound(trained_pair):
    _, par, _, _ = trained_pair
    trace = np.array(par.play_trace)  # (consumed, produced) vector steps at every round of updates
    assert len(trace) == 60
    ahead = trace[:, 1] - trace[:, 0]
    assert ahead.min() >= 0 and ahead.max() <= par.play_ahead == 4
    # every round of updates sees all the steps the synchronous loop would have seen
    assert np.array_equal(trace[:, 0], 64 + 4 * np.arange(1, 61))


def test_weights_reach_the_player(trained_pair):
    _, par, initial, player = trained_pair
    trained = _flat_state(par.q_net)
    assert not torch.equal(trained, initial)  # the updates changed the network
    assert torch.equal(player, trained)  # and the player acts with the trainer's newest weights


def test_qrdqn_plays_in_parallel_and_its_weights_reach_the_player():
    import sb3_contrib

    preset = apply_overrides(
        get_preset("qrdqn"),
        {"buffer_size": 1000, "learning_starts": 32, "batch_size": 8, "train_freq": 4},
        algo="qrdqn",
    )
    play = make_play_env(PONG, n_envs=1, seed=0)
    try:
        model = parallel_play_class(sb3_contrib.QRDQN)(
            env=play, seed=0, device="cpu", **to_sb3_kwargs(preset)
        )
        initial = _flat_state(model.quantile_net).clone()
        model.learn(96)
        player = play.player_weights()
    finally:
        play.close()
    assert model.num_timesteps == 96 and model._n_updates == (96 - 32) // 4
    trained = _flat_state(model.quantile_net)
    assert not torch.equal(trained, initial) and torch.equal(player, trained)


def test_options_and_env_are_checked():
    assert parse_options(True) == {
        "ahead": None,
        "weights_every": None,
        "trainer_threads": None,
        "when": "cuda",
    }
    for bad in ({"ahaed": 1}, {"ahead": -1}, {"weights_every": 0}, "yes"):
        with pytest.raises(ValueError, match="parallel_play"):
            parse_options(bad)
    with pytest.raises(TypeError, match="DQN or QRDQN"):
        from stable_baselines3 import PPO

        parallel_play_class(PPO)
    with pytest.raises(RunError, match="parallel_play is for dqn"):
        resolve_config(TrainSpec(algo="ppo", env_id=PONG, overrides={"parallel_play": True}))
    with pytest.raises(RunError, match="unknown parallel_play option 'every'"):
        resolve_config(
            TrainSpec(
                algo="dqn", env_id=PONG, preset="pong-dqn-fast", overrides={"parallel_play": {"every": 3}}
            )
        )
    venv = make_vec_env(PONG, n_envs=1)
    try:
        model = parallel_play_class(DQN)(env=venv, **_kwargs(learning_starts=10))
        with pytest.raises(TypeError, match="make_play_env"):
            model.learn(8)
    finally:
        venv.close()


def test_the_preset_resolves_to_four_steps_per_update_and_parallel_play():
    cfg = resolve_config(TrainSpec(algo="dqn", env_id=PONG, preset="pong-dqn-fast"))
    assert cfg["n_envs"] == 1  # the preset's one env, not one per CPU: n_envs sets the updates per env step
    hp = cfg["hyperparams"]
    assert hp["train_freq"] == 4 and hp["batch_size"] == 4 * get_preset("dqn", "pong-dqn")["batch_size"]
    assert hp["parallel_play"] and "parallel_play" not in algo_kwargs(cfg)


# ------------------------------------------------------------------------------------------------------
# The command: a killed play process, then --resume
# ------------------------------------------------------------------------------------------------------

TINY = [
    "--set",
    "parallel_play.when=always",  # the play process on this CPU learner too (by default only for CUDA)
    "--n-envs",
    "1",
    "--set",
    "buffer_size=3000",
    "--set",
    "learning_starts=100",
    "--set",
    "batch_size=16",
]


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "timed out"
        time.sleep(0.2)


def test_killed_player_stops_training_with_a_checkpoint_and_resume_continues(tmp_path):
    run = str(tmp_path / "run")
    cmd = [
        sys.executable,
        "-m",
        "retro_atari_kit.cli",
        "train",
        "dqn",
        PONG,
        "--preset",
        "pong-dqn-fast",
        "--timesteps",
        "1e6",
        "--checkpoint-every",
        "200",
        "--run-dir",
        run,
        *TINY,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: list_checkpoints(run), proc)  # training is under way
        trainer = psutil.Process(proc.pid)
        family = trainer.children(recursive=True)
        players = [
            p
            for p in family
            if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())
        ]
        assert len(players) == 1, [p.cmdline() for p in family]
        players[0].send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    errors = [line for line in err.splitlines() if line.startswith("retrokit: error:")]
    assert len(errors) == 1, err  # one line (the progress bar may be redrawn after it)
    last = errors[0]
    assert last.startswith("retrokit: error: the play process of RetroKit/Pong-v0")
    assert f"(pid {players[0].pid}) died: killed by SIGKILL" in last and "checkpoint" in last
    gone, alive = psutil.wait_procs(family, timeout=10)
    assert not alive, [p.cmdline() for p in alive]  # no orphans
    steps, path = list_checkpoints(run)[-1]
    assert steps >= 200 and f"checkpoint {path}" in last
    assert os.path.exists(os.path.join(run, "checkpoints", "replay_buffer.npz"))

    # --resume continues the step count from that checkpoint, with the replay buffer
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "retro_atari_kit.cli",
            "train",
            "--resume",
            run,
            "--timesteps",
            str(steps + 100),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "replay buffer restored" in res.stdout and f"done: {steps + 100} steps" in res.stdout
    assert DQN.load(os.path.join(run, "model.zip")).num_timesteps == steps + 100
    assert os.path.isdir(os.path.join(run, "monitor", "resume-1"))


def test_closing_the_env_leaves_no_process():
    play = PlayProcessVecEnv(PONG, n_envs=1, seed=0)
    proc = psutil.Process(play.pid)
    play.close()
    play.close()  # idempotent
    assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE


def test_a_player_that_cannot_build_its_envs_names_the_cause_in_one_line():
    with pytest.raises(PlayerDiedError) as err:
        make_play_env(PONG, n_envs=1, noop_max=-1)  # checked where the envs are built: in the play process
    message = str(err.value)
    assert message.startswith("the play process of RetroKit/Pong-v0 (pid ")
    assert message.endswith("died while starting: ValueError: noop_max must be an int >= 0, got -1")
    assert err.value.exitcode == 1


def test_a_player_killed_during_a_request_raises_at_once():
    play = PlayProcessVecEnv(PONG, n_envs=1, seed=0)
    try:
        play.reset()
        os.kill(play.pid, signal.SIGKILL)
        with pytest.raises(PlayerDiedError) as err:
            play.reset()  # waits on the player's answer: its death ends the wait, no timeout involved
        assert (
            str(err.value)
            == f"the play process of {PONG} (pid {play.pid}) died: killed by SIGKILL (signal 9)"
        )
    finally:
        play.close()
