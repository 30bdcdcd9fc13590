"""The machine users have: no display at all (no ``DISPLAY``, ``WAYLAND_DISPLAY`` or SDL driver set), where
gymnasium's and SB3's ``check_env`` and ``render_mode="human"`` must pass with one ``NoDisplayWarning`` and no
traceback. A real Python script in a fresh folder (``expect="script"``; ``env`` values of None remove that
variable). And an environment whose ``RETROKIT_ADAPTERS`` is neither on nor off: the command works, after one
warning line naming the accepted values.

The sweep's other machine and fault cases are tests where their subject lives, kept there only: another Ray
cluster (tests/integrations/rllib/test_rllib_beside_a_cluster.py), rl-zoo3 without ``--conf-file``
(tests/integrations/zoo/test_zoo.py), ``RecordVideo`` around a kit env (tests/core/test_recorders.py),
``vectorization_mode`` values (tests/core/test_vector.py), a vector env used from two threads or copied
(tests/core/test_vector_threads.py), an env worker killed during ``retrokit train``
(tests/cli/test_train_faults.py)."""

from __future__ import annotations

import pytest

from tests.sweep._checks import says
from tests.sweep._setups import script
from tests.sweep._sweep import Case, check, params

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
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


CASES = [
    Case("machine: no display", ["check.py"], [script("check.py", CHECK_ENVS)], expect="script", exit_code=0,
         writes_nothing=False, env=NO_DISPLAY, check=says("checked", once="NoDisplayWarning"), ci=True),
    *(
        Case("machine: RETROKIT_ADAPTERS neither on nor off", ["list", "Pong"], expect="clean", exit_code=0,
             env={"RETROKIT_ADAPTERS": value}, needles=("0, false, no, off (off) or 1, true, yes, on (on)",),
             check=says("RetroKit/Pong-v0", once="is neither on nor off"), ci=value == "2")
        for value in ("2", "maybe")
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", params(CASES))
def test_case(case: Case, tmp_path) -> None:
    check(case, tmp_path)
