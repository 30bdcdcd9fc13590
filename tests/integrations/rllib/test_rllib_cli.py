"""``retrokit train ... --engine rllib``'s refusals, as a user meets them: RLlib options without the RLlib
engine, an unreachable ``--address``, a Python without Ray. (The engine's whole life, from a stop signal
through ``--resume``, ``eval``, ``record`` and ``plot``, is one run in ``tests/cli/test_stop_signals.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys

import ray  # noqa: F401  (the rllib extra: a broken install fails here, never skips)

ENV = "RetroKit/Pong-v0"


def test_rllib_options_need_the_rllib_engine(capsys):
    from retro_atari_kit.cli import main

    assert main(["train", "ppo", ENV, "--num-env-runners", "2"]) == 2
    assert "--num-env-runners needs --engine rllib" in capsys.readouterr().err


def test_unreachable_address_is_one_line(tmp_path, capsys):
    from retro_atari_kit.cli import main

    run = str(tmp_path / "r")
    code = main(["train", "ppo", ENV, "--engine", "rllib", "--address", "127.0.0.1:9", "--run-dir", run])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "cannot reach a Ray head at 127.0.0.1:9" in err and "ray start --head" in err
    assert not os.path.exists(run), "nothing is written before the address is known to work"


def test_without_ray_one_line_names_the_extra(tmp_path):
    # a Python where `import ray` fails (None in sys.modules blocks the import, as if Ray were not installed)
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from retro_atari_kit.cli import main\n"
        f"sys.exit(main(['train', 'appo', '{ENV}', '--engine', 'rllib', '--run-dir', r'{tmp_path / 'r'}']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    err = [line for line in proc.stderr.splitlines() if line.startswith("retrokit")]
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-2000:]
    assert 'pip install "retro-atari-kit[rllib]"' in err[0]
    assert not (tmp_path / "r").exists()
