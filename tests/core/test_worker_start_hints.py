"""A worker that dies while starting names the real cause: an unguarded script, or one read from stdin.

``forkserver``/``spawn`` workers start by re-importing the main script. A script piped on standard input
(``python - < script.py``) cannot be re-imported, main guard or not, so the main-guard hint would send the
user after a fix they already have. Real subprocesses, real emulators.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

GUARDED_VECTOR = """
import gymnasium as gym
import retro_atari_kit  # noqa: F401

if __name__ == "__main__":
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=2, backend="subprocess")
    venv.close()
    print("made")
"""

GUARDED_SECOND_RETRO = """
import gymnasium as gym
import retro_atari_kit  # noqa: F401

if __name__ == "__main__":
    first = gym.make("RetroKit/Pong-Atari2600-v0")
    second = gym.make("RetroKit/Pong-Atari2600-v0")  # stable-retro: one per process, so a worker hosts it
    second.close()
    first.close()
    print("made")
"""


def run_from_stdin(script: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-"],
        input=textwrap.dedent(script),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (GUARDED_VECTOR, "retro_atari_kit.vector.WorkerDiedError: env rank 0"),
        (
            GUARDED_SECOND_RETRO,
            "retro_atari_kit.envs.retro_worker.EnvWorkerDiedError: RetroKit/Pong",
        ),
    ],
    ids=["subprocess-vector-env", "second-retro-env"],
)
def test_guarded_script_on_stdin_is_told_to_run_from_a_file(tmp_path, script, error):
    proc = run_from_stdin(script, tmp_path)
    assert proc.returncode == 1 and "made" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(error)
    assert "while starting" in last
    assert "yours was read from <stdin> (e.g. `python - < script.py`)" in last
    assert "save the script to a file and run it as `python script.py`" in last
    assert "__main__" not in last  # the script has its guard: that hint would be wrong


def test_the_same_guarded_script_from_a_file_works(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent(GUARDED_SECOND_RETRO))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("made")
