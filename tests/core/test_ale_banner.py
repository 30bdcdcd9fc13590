"""ale-py's start-up banner stays off stderr when envs are made from Python, not only in ``retrokit``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BANNER = "A.L.E: Arcade Learning Environment"


def _stderr_of(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def test_bare_ale_prints_the_banner():
    # the control: what the kit keeps off stderr is there without it
    stderr = _stderr_of("""
        from ale_py import AtariEnv
        AtariEnv(game="pong").reset(seed=0)
    """)
    assert BANNER in stderr


def test_making_and_stepping_kit_envs_prints_no_banner():
    stderr = _stderr_of("""
        import gymnasium as gym, retro_atari_kit
        env = gym.make("RetroKit/Pong-v0")
        env.reset(seed=0)
        for _ in range(5):
            env.step(env.action_space.sample())
        env.close()
        envs = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")  # workers make AtariEnvs
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        envs.close()
        envs = gym.make_vec("RetroKit/Breakout-v0", num_envs=2, backend="native")  # ale-py's vector env
        envs.reset(seed=0)
        envs.close()
    """)
    assert BANNER not in stderr and "Powered by Stella" not in stderr, stderr
