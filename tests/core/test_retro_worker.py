"""A further stable-retro env in a process that already has an emulator runs in a worker process and behaves
exactly like the in-process env (real emulators on both sides; every test closes its envs)."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium.utils.env_checker import data_equivalence

import retro_atari_kit  # noqa: F401
from retro_atari_kit.envs.retro_worker import EnvWorkerDiedError, RetroWorkerEnv

GAMES = {"Airstriker-Genesis": 126, "Pong-Atari2600": 18}  # game -> size of its discrete action set


def _pair(env_id, **kwargs):
    first = gym.make(env_id, **kwargs)
    try:
        second = gym.make(env_id, **kwargs)
    except BaseException:
        first.close()
        raise
    return first, second


def _gone(pid, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("game", sorted(GAMES))
def test_worker_env_equals_the_in_process_env_step_by_step(game):
    env_id = f"RetroKit/{game}-v0"
    local, remote = _pair(env_id, render_mode="rgb_array", max_episode_steps=200)
    try:
        assert not isinstance(local.unwrapped, RetroWorkerEnv)
        assert isinstance(remote.unwrapped, RetroWorkerEnv)
        assert remote.observation_space == local.observation_space
        assert remote.action_space == local.action_space
        assert remote.spec == local.spec and remote.spec.max_episode_steps == 200
        assert remote.metadata == local.metadata and remote.render_mode == "rgb_array"
        actions = np.random.default_rng(1).integers(0, GAMES[game], size=320).tolist()
        for env in (local, remote):
            env.action_space.seed(0)
        a, b = local.reset(seed=7), remote.reset(seed=7)
        assert data_equivalence(a, b)
        truncations = 0
        for t, action in enumerate(actions):
            a, b = local.step(action), remote.step(action)
            assert data_equivalence(a, b), f"step {t}: {a[1:]} != {b[1:]}"
            if t % 40 == 0:
                assert np.array_equal(local.render(), remote.render())
            if a[2] or a[3]:  # the 200-step limit: reset without a seed, the envs' own RNGs go on
                truncations += a[3]
                assert data_equivalence(local.reset(), remote.reset())
        assert truncations == 1
        # an exception inside the worker arrives with the in-process env's type and message
        with pytest.raises(Exception) as in_process:
            local.step("x")
        with pytest.raises(type(in_process.value)) as in_worker:
            remote.step("x")
        assert str(in_worker.value) == str(in_process.value)
    finally:
        local.close()
        remote.close()


def test_two_different_games_step_side_by_side_and_attributes_reach_the_worker():
    pong = gym.make("RetroKit/Pong-Atari2600-v0")
    air = gym.make("RetroKit/Airstriker-Genesis-v0", action_set="sonic")
    try:
        assert isinstance(air.unwrapped, RetroWorkerEnv)
        assert air.get_wrapper_attr("get_action_meanings")()[5] == "DOWN+B"
        assert air.has_wrapper_attr("get_action_meanings")
        assert air.get_wrapper_attr("_max_episode_steps") == 4500
        pong.reset(seed=0)
        air.reset(seed=0)
        for _ in range(30):
            assert pong.step(1)[0].shape == air.step(6)[0].shape == (4, 84, 84)
    finally:
        air.close()
        pong.close()
    # the in-process slot is free again: the next env runs in this process
    env = gym.make("RetroKit/Airstriker-Genesis-v0")
    try:
        assert not isinstance(env.unwrapped, RetroWorkerEnv)
    finally:
        env.close()


def test_killed_worker_raises_a_clear_error_at_once():
    local, remote = _pair("RetroKit/Pong-Atari2600-v0")
    try:
        remote.reset(seed=0)
        pid = remote.unwrapped.worker_pid
        os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(EnvWorkerDiedError) as info:
            remote.step(0)
        assert time.monotonic() - start < 5
        message = str(info.value)
        assert message.startswith(f"RetroKit/Pong-Atari2600-v0: the worker process (pid {pid})")
        assert "died: killed by SIGKILL (signal 9)" in message
        assert "gym.make('RetroKit/Pong-Atari2600-v0')" in message and "\n" not in message
        with pytest.raises(EnvWorkerDiedError):  # and again, without waiting on anything
            remote.reset()
        remote.close()
        remote.close()
        local.reset(seed=0)  # the in-process env is untouched
        local.step(0)
    finally:
        remote.close()
        local.close()


def test_close_and_garbage_collection_end_the_worker():
    local, remote = _pair("RetroKit/Pong-Atari2600-v0")
    try:
        pid = remote.unwrapped.worker_pid
        assert psutil.pid_exists(pid)
        remote.close()
        assert _gone(pid)
        remote.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            remote.reset()
        dropped = gym.make("RetroKit/Airstriker-Genesis-v0")
        pid = dropped.unwrapped.worker_pid
        dropped.reset(seed=0)
        del dropped
        gc.collect()
        assert _gone(pid)
    finally:
        local.close()


def test_no_worker_outlives_the_interpreter(tmp_path):
    script = tmp_path / "two_envs.py"
    script.write_text(
        textwrap.dedent("""
        import gymnasium as gym
        import retro_atari_kit

        if __name__ == "__main__":
            first = gym.make("RetroKit/Pong-Atari2600-v0")
            second = gym.make("RetroKit/Pong-Atari2600-v0")
            second.reset(seed=0)
            print(second.unwrapped.worker_pid, flush=True)
            # exits without close()
    """)
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pid = int(proc.stdout.strip().splitlines()[-1])
    assert _gone(pid)


def test_dummy_vec_env_over_three_retro_envs():
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: gym.make("RetroKit/Pong-Atari2600-v0") for _ in range(3)])
    try:
        pids = [getattr(e.unwrapped, "worker_pid", None) for e in venv.envs]
        assert pids[0] is None and None not in pids[1:] and pids[1] != pids[2]
        venv.seed(0)
        obs = venv.reset()
        for _ in range(10):
            obs, rewards, dones, infos = venv.step(np.array([0, 1, 2]))
        assert obs.shape == (3, 4, 84, 84) and obs.dtype == np.uint8
    finally:
        venv.close()
    assert all(_gone(pid) for pid in pids[1:])


def test_evaluating_a_retro_model_while_a_training_env_is_open():
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy

    train_env = gym.make("RetroKit/Pong-Atari2600-v0")
    try:
        model = PPO("CnnPolicy", train_env, n_steps=16, batch_size=16, seed=0, device="cpu")
        eval_env = gym.make("RetroKit/Pong-Atari2600-v0", max_episode_steps=20)
        try:
            assert isinstance(eval_env.unwrapped, RetroWorkerEnv)
            rewards, lengths = evaluate_policy(
                model, eval_env, n_eval_episodes=2, return_episode_rewards=True, warn=False
            )
            assert lengths == [20, 20]
        finally:
            eval_env.close()
        model.learn(total_timesteps=16)  # the training env is still usable
    finally:
        train_env.close()


def test_an_emulator_made_outside_the_kit_also_sends_the_env_to_a_worker():
    import stable_retro

    raw = stable_retro.make("Airstriker-Genesis-v0", render_mode=None)
    try:
        env = gym.make("RetroKit/Pong-Atari2600-v0")
        try:
            assert isinstance(env.unwrapped, RetroWorkerEnv)
            obs, _ = env.reset(seed=0)
            assert obs.shape == (4, 84, 84) and obs.any()
        finally:
            env.close()
    finally:
        raw.close()
