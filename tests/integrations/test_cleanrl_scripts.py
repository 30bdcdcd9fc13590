"""docs/cleanrl.md's changes, applied to CleanRL's current ``ppo_atari.py`` and ``dqn_atari.py`` and run.

The scripts are CleanRL's, not the kit's: they are read from a CleanRL checkout named by ``CLEANRL_DIR``
(``git clone https://github.com/vwxyzjn/cleanrl``; its ``cleanrl/`` scripts and ``cleanrl_utils/``), and the
module is skipped without one. Each step of the page is applied as the page words it, and a step that no
longer matches the script (CleanRL moved an import, renamed a key) fails here: the page has drifted. The
edited scripts then train a few hundred steps on ``RetroKit/Breakout-v0`` and log true game scores.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CLEANRL = os.environ.get("CLEANRL_DIR")
DOC = Path(__file__).resolve().parents[2] / "docs" / "cleanrl.md"
WRAPPERS = ["NoopResetEnv", "MaxAndSkipEnv", "EpisodicLifeEnv", "FireResetEnv", "ClipRewardEnv"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CLEANRL or not os.path.isfile(os.path.join(CLEANRL, "cleanrl", "ppo_atari.py")),
        reason="set CLEANRL_DIR to a CleanRL checkout (git clone https://github.com/vwxyzjn/cleanrl)",
    ),
]


def _doc_blocks() -> list[str]:
    """The page's ```text blocks, in order: make_env, the episode log."""
    return [textwrap.dedent(b) for b in re.findall(r"```text\n(.*?)```", DOC.read_text(), re.S)]


def _sub_once(text: str, pattern: str, repl: str, what: str) -> str:
    """``re.sub`` that must match exactly once: otherwise the page no longer matches the script."""
    text, count = re.subn(pattern, repl, text, flags=re.S | re.M)
    assert count == 1, f"docs/cleanrl.md drifted: {what} is not in the script as the page says"
    return text


def apply_page(script: str, name: str) -> str:
    """The page's steps 1-5 (and, for dqn_atari.py, its one more line) applied to ``script``."""
    make_env_doc, log_doc = _doc_blocks()
    # 1. the wrappers' import block goes, the kit is imported; the page names the module they come from
    block = re.search(r"^from (\S+) import \(([^)]*NoopResetEnv[^)]*)\)\n", script, re.M)
    assert block, "no import block of the Atari wrappers in the script"
    assert f"delete the `from {block.group(1)} import (...)` block" in DOC.read_text(), (
        f"docs/cleanrl.md drifted: the script imports its wrappers from {block.group(1)}"
    )
    assert sorted(re.findall(r"\w+", re.sub(r"#.*", "", block.group(2)))) == sorted(WRAPPERS), block.group(2)
    script = script.replace(block.group(0), "import retro_atari_kit\n")
    buffer = re.search(r"^from (\S+) import ReplayBuffer$", script, re.M)
    if name == "dqn_atari.py":  # the replay buffer stays, from where the page says
        assert buffer and f"`from {buffer.group(1)} import ReplayBuffer`" in DOC.read_text(), (
            f"docs/cleanrl.md drifted: the script imports ReplayBuffer from {buffer and buffer.group(1)}"
        )
    # 2. the env id
    script = _sub_once(
        script,
        r'env_id: str = "BreakoutNoFrameskip-v4"',
        'env_id: str = "RetroKit/Breakout-v0"',
        "Args.env_id",
    )
    # 3. make_env's wrapper block, from after RecordEpisodeStatistics to the frame stack, goes
    script = _sub_once(
        script,
        r"(env = gym\.wrappers\.RecordEpisodeStatistics\(env\)\n)"
        r"\s*env = NoopResetEnv.*?FrameStack\(env, 4\)\n",
        r"\1",
        "make_env's wrapper block",
    )
    if name == "ppo_atari.py":  # what is left is the page's make_env
        start = script.index("def make_env(")
        assert script[start : script.index("    return thunk\n", start) + 17] == make_env_doc
    # 4. SAME_STEP autoreset
    script = _sub_once(
        script,
        r"envs = gym\.vector\.SyncVectorEnv\(\n"
        r"(\s*\[make_env\(.*? for i in range\(args\.num_envs\)\]),?\n\s*\)",
        r"envs = gym.vector.SyncVectorEnv(\n\1,\n"
        r"        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n    )",
        "the SyncVectorEnv call",
    )
    # 5. the episode log
    log = re.search(r"^( *)if \"final_info\" in infos:\n.*?charts/episodic_length.*?\n", script, re.S | re.M)
    assert log, 'docs/cleanrl.md drifted: no `if "final_info" in infos:` log block'
    script = script.replace(log.group(0), textwrap.indent(log_doc, log.group(1)))
    if name == "dqn_atari.py":  # and one more line
        script = _sub_once(script, re.escape('infos["final_observation"][idx]'), 'infos["final_obs"][idx]',
                           'infos["final_observation"]')  # fmt: skip
    ast.parse(script)
    for wrapper in WRAPPERS:
        assert wrapper not in script
    return script


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "name, argv",
    [
        ("ppo_atari.py", ["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128"]),
        ("dqn_atari.py", ["--total-timesteps", "1000", "--learning-starts", "200", "--buffer-size", "1000"]),
    ],
)
def test_the_page_applied_to_cleanrls_current_script_trains_on_a_kit_id(tmp_path, name, argv):
    pytest.importorskip("tyro", reason="CleanRL's scripts parse their arguments with tyro")
    edited = tmp_path / name
    edited.write_text(apply_page(Path(CLEANRL, "cleanrl", name).read_text(), name))
    env = {**os.environ, "PYTHONPATH": CLEANRL, "OMP_NUM_THREADS": "1"}  # cleanrl_utils.buffers for DQN
    proc = subprocess.run([sys.executable, str(edited), *argv, "--no-cuda", "--seed", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=540, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    returns = [float(m) for m in re.findall(r"episodic_return=([-\d.]+)", proc.stdout)]
    assert returns, proc.stdout[-2000:]  # a real game ended (5 lives) and was logged once
    assert all(r == int(r) >= 0 for r in returns)  # Breakout's true score: whole bricks, unclipped sums
