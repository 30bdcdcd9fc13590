"""The guard and the lifecycle of the SB3 adapters, on the installed SB3: a module whose shape changed is not
adapted and one warning says so; an SB3 whose version is outside the tested range is not adapted at all;
``RETROKIT_ADAPTERS=0`` leaves SB3 as it is until ``enable_adapters()``; ``importlib.reload`` gives SB3's own
classes back, and ``enable_adapters()`` adapts them again (one process for both: each costs an SB3 import).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import warnings

from stable_baselines3.common import monitor as monitor_module
from stable_baselines3.common.vec_env import vec_monitor

import retro_atari_kit
from retro_atari_kit.adapters import MARK, adapted

SB3_VERSION = importlib.metadata.version("stable-baselines3")


def _python(code: str, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_module_whose_shape_changed_is_not_adapted_and_one_warning_says_what_is_lost(monkeypatch):
    retro_atari_kit.disable_adapters()  # SB3's own methods back, so the next adaption starts from SB3's shape
    try:
        monkeypatch.delattr(monitor_module.Monitor, "step")  # what Monitor's adapter wraps
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            retro_atari_kit.enable_adapters()
            retro_atari_kit.enable_adapters()  # adapting again: still one warning
        ours = [w for w in caught if "retro-atari-kit" in str(w.message)]
        assert len(ours) == 1 and ours[0].category is RuntimeWarning
        message = str(ours[0].message)
        assert (
            f"stable-baselines3 {SB3_VERSION} has no stable_baselines3.common.monitor.Monitor.step" in message
        )
        assert (
            "the kit adapts nothing in stable_baselines3.common.monitor: SB3's Monitor around kit envs "
            "records per-life clipped returns, not the kit's true game scores" in message
        )
        assert "RETROKIT_ADAPTERS=0" in message
        assert "step" not in monitor_module.Monitor.__dict__  # nothing put in its place
        names = adapted()
        assert not [name for name in names if ".Monitor." in name]
        assert "stable_baselines3.common.vec_env.vec_monitor.VecMonitor.step_wait" in names  # its own shape
    finally:
        monkeypatch.undo()
        retro_atari_kit.enable_adapters()
    assert getattr(monitor_module.Monitor.step, MARK, False)
    assert getattr(vec_monitor.VecMonitor.step_wait, MARK, False)


def test_an_sb3_outside_the_tested_range_is_not_adapted_and_its_monitor_reports_lives(tmp_path):
    # the installed SB3's modules, under another version number: a distribution found first on sys.path
    info = tmp_path / "stable_baselines3-2.6.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: stable-baselines3\nVersion: 2.6.0\n")
    code = (
        "import json, warnings\n"
        "import numpy as np\n"
        "import retro_atari_kit\n"
        "from retro_atari_kit.adapters import adapted\n"
        "from retro_atari_kit.registration import make_env\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    from stable_baselines3.common.monitor import Monitor\n"
        "    from stable_baselines3.common.vec_env import VecFrameStack, VecMonitor\n"
        "messages = [str(w.message) for w in caught if 'retro-atari-kit' in str(w.message)]\n"
        "monitor = Monitor(make_env('RetroKit/SpaceInvaders-v0'))\n"
        "monitor.reset(seed=0)\n"
        "rng = np.random.default_rng(0)\n"
        "while True:\n"
        "    _, _, terminated, truncated, info = monitor.step(int(rng.integers(monitor.action_space.n)))\n"
        "    if terminated or truncated:\n"
        "        break\n"
        "print(json.dumps({'messages': messages, 'adapted': adapted(), "
        "'lives': monitor.unwrapped.ale.lives(), 'episodes': monitor.get_episode_rewards()}))\n"
    )
    out = json.loads(_python(code, PYTHONPATH=str(tmp_path)).splitlines()[-1])
    assert len(out["messages"]) == 1, out["messages"]  # one for SB3, not one per module
    assert "stable-baselines3 2.6.0 is not in the tested range >=2.7,<2.10" in out["messages"][0]
    assert (
        "the kit adapts none of its modules, so its episode recorders around kit envs report per-life "
        "clipped scores, not the kit's true game scores" in out["messages"][0]
    )
    assert not [name for name in out["adapted"] if name.startswith("stable_baselines3")]
    assert "gymnasium.wrappers.common.RecordEpisodeStatistics.step" in out["adapted"]
    assert out["lives"] > 0 and len(out["episodes"]) == 1  # SB3's own Monitor: an episode per life


def test_opt_out_by_environment_then_enable_then_reload():
    """``RETROKIT_ADAPTERS=0``: SB3 as it is; ``enable_adapters()`` adapts it and, through its hook, the zoo
    loaded later; ``importlib.reload`` gives SB3's own class back, ``enable_adapters()`` adapts it again."""
    code = (
        "import importlib, retro_atari_kit, stable_baselines3\n"
        "from retro_atari_kit.adapters import MARK, adapted\n"
        "import stable_baselines3.common.monitor as module\n"
        "print(adapted(), hasattr(module.Monitor.step, MARK))\n"
        "retro_atari_kit.enable_adapters()\n"
        "from rl_zoo3.exp_manager import ExperimentManager\n"
        "print(hasattr(module.Monitor.step, MARK), hasattr(ExperimentManager.is_atari, MARK))\n"
        "before = module.Monitor\n"
        "importlib.reload(module)\n"
        "print(before is module.Monitor, hasattr(before.step, MARK), hasattr(module.Monitor.step, MARK))\n"
        "retro_atari_kit.enable_adapters()\n"
        "print(hasattr(module.Monitor.step, MARK))\n"
    )
    assert _python(code, RETROKIT_ADAPTERS="0").splitlines()[-4:] == [
        "[] False",
        "True True",
        "False True False",
        "True",
    ]
