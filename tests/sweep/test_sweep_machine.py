"""The machines and faults users have: no display (gymnasium's and SB3's ``check_env``,
``render_mode="human"``), another Ray cluster on the machine, rl-zoo3 without ``--conf-file``,
``RecordVideo`` around a kit env, ``vectorization_mode`` values, a vector env used from two threads or
copied, and an env worker killed with SIGKILL during ``retrokit train`` (then resumed). Each is a real Python
script or command (``expect="script"``: its exit code and output are checked, never a traceback; ``env``
values of None remove that variable)."""

from __future__ import annotations

import pytest

from tests.sweep._sweep import Case, check, ci_first, killed_worker_then_resumed, params, says, script

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


NO_DISPLAY = {"DISPLAY": None, "WAYLAND_DISPLAY": None, "SDL_VIDEODRIVER": None, "SDL_AUDIODRIVER": None}


CHECK_ENVS = """
import gymnasium as gym, retro_atari_kit
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
if __name__ == "__main__":
    for env_id in ("RetroKit/Pong-v0", "RetroKit/Airstriker-Genesis-v0"):
        env = gym.make(env_id)
        check_env(env)
        sb3_check_env(env)
        env.close()
    env = gym.make("RetroKit/Breakout-v0", render_mode="human")
    env.reset(seed=0)
    for _ in range(20):
        env.step(1)
    env.close()
    print("checked")
"""

TWO_THREADS = """
import threading, numpy as np, gymnasium as gym, retro_atari_kit
if __name__ == "__main__":
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")
    venv.reset(seed=0)
    refused, done = [], threading.Event()
    def play():
        while not done.is_set():
            try:
                venv.step(np.zeros(2, dtype=np.int64))
            except RuntimeError as exc:
                refused.append(str(exc)); done.set()
    threads = [threading.Thread(target=play, daemon=True) for _ in range(2)]
    [t.start() for t in threads]
    done.wait(120); done.set(); [t.join(60) for t in threads]
    assert not any(t.is_alive() for t in threads), "deadlock"
    print(refused[0] if refused else "no overlap")
    import copy, pickle
    for do in (copy.deepcopy, copy.copy, pickle.dumps):
        try:
            do(venv)
        except TypeError as exc:
            print("copy refused:", exc)
    venv.step(np.zeros(2, dtype=np.int64))
    venv.close()
    print("played on")
"""

RECORD_GAMES = """
import os, gymnasium as gym, retro_atari_kit
if __name__ == "__main__":
    env = gym.make("RetroKit/Breakout-v0", render_mode="rgb_array")
    env = gym.wrappers.RecordVideo(env, "videos", episode_trigger=lambda game: game == 0, disable_logger=True)
    env.reset(seed=0)
    env.action_space.seed(0)
    lives_lost = 0
    while True:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            if "episode" in info:
                break
            lives_lost += 1
            env.reset()
    print(f"lives lost before game over: {lives_lost}; recording: {env.recording}")
    env.reset()
    env.close()
    print(sorted(os.listdir("videos")))
"""

VECTORIZATION_MODE = """
import gymnasium as gym, retro_atari_kit
if __name__ == "__main__":
    try:
        gym.make_vec("RetroKit/Pong-v0", num_envs=2, vectorization_mode="native")
    except ValueError as exc:
        print("gymnasium refuses:", exc)
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="native")
    print("backend:", venv.backend)
    venv.close()
"""

BESIDE_A_CLUSTER = """
import os, signal, socket, subprocess, sys, tempfile, time
if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]
    env = {**os.environ, "RAY_TMPDIR": tmp}
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    start = [ray, "start", "--head", "--num-cpus=1", f"--port={port}", "--include-dashboard=false",
             "--disable-usage-stats", "--block"]
    head = subprocess.Popen(start, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while not os.path.exists(os.path.join(tmp, "ray", "ray_current_cluster")):
            assert head.poll() is None and time.sleep(0.2) is None
        retrokit = os.path.join(os.path.dirname(sys.executable), "retrokit")
        small = ["--num-env-runners", "1", "--envs-per-runner", "2", "--set",
                 "train_batch_size_per_learner=32", "--set", "rollout_fragment_length=16", "--set",
                 "min_time_s_per_iteration=1", "--checkpoint-every", "0"]
        for argv, extra in (
            (["train", "appo", "RetroKit/Pong-v0", "--engine", "rllib", "--timesteps", "64", "--run-dir",
              "run", *small], {}),
            (["train", "--resume", "run", "--timesteps", "128"], {"RAY_ADDRESS": f"127.0.0.1:{port}"}),
        ):
            res = subprocess.run([retrokit, *argv], env={**env, **extra}, capture_output=True, text=True)
            said = res.stderr.strip().splitlines()[-1:] if res.returncode else ""
            print(argv[1], "exit", res.returncode, said)
        print("other cluster alive:", head.poll() is None)
    finally:  # its own process group: the blocking `ray start` and what it started, and nothing else
        for sig in (signal.SIGTERM, signal.SIGKILL):
            os.killpg(head.pid, sig)
            try:
                head.wait(10)
                break
            except subprocess.TimeoutExpired:
                pass
"""


def env_cases() -> list[Case]:
    g = "machine: what users have"
    cases = [
        Case(g, ["check.py"], [script("check.py", CHECK_ENVS)], expect="script", exit_code=0,
             writes_nothing=False, env=NO_DISPLAY, check=says("checked", once="NoDisplayWarning")),
        Case(g, ["beside.py"], [script("beside.py", BESIDE_A_CLUSTER)], expect="script", exit_code=0,
             writes_nothing=False, check=says("appo exit 0", "--resume exit 0", "other cluster alive: True")),
        Case(g, ["-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV, "--gym-packages", "retro_atari_kit",
                 "-n", "256", "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64",
                 "--eval-freq", "-1"],
             expect="script", exit_code=0, writes_nothing=False,
             check=says("hyperparameters from --conf-file retro_atari_kit.integrations.zoo.ppo")),
        Case(g, ["-m", "rl_zoo3.train", "--algo", "qrdqn", "--env", ENV, "--gym-packages", "retro_atari_kit"],
             expect="script", exit_code=1, check=says("pass --conf-file", once="retro-atari-kit:")),
        Case(g, ["record.py"], [script("record.py", RECORD_GAMES)], expect="script", exit_code=0,
             writes_nothing=False,
             check=says("lives lost before game over: 4; recording: True", "['rl-video-episode-0.mp4']")),
        Case(g, ["vecmode.py"], [script("vecmode.py", VECTORIZATION_MODE)], expect="script", exit_code=0,
             writes_nothing=False, check=says("Invalid vectorization mode: 'native'", "backend: native")),
    ]  # fmt: skip
    g = "fault: during a run"
    cases += [
        Case(g, ["threads.py"], [script("threads.py", TWO_THREADS)], expect="script", exit_code=0,
             writes_nothing=False,
             check=says("refused: another thread is in a call", "played on", "copy refused:")),
        Case(g, ["train", "ppo", ENV, "--backend", "subprocess", "--n-envs", "2", "--set", "n_steps=32",
                 "--set", "batch_size=32", "--checkpoint-every", "64", "--timesteps", "1e6",
                 "--run-dir", "run"],
             expect="clean", writes_nothing=False, exit_code=2, send_signal="SIGKILL to an env worker",
             check=killed_worker_then_resumed()),
    ]  # fmt: skip
    return cases


@pytest.mark.parametrize("case", params(ci_first(env_cases())))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
