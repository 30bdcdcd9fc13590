"""The learning results in docs/results.md are claims users will check: their final weights are committed
under ``results/`` and ``retrokit eval`` must load and replay them on any machine (CPU, no Ray cluster).
A short deterministic evaluation has to come out ahead, as the documented 100-game figures do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


@pytest.mark.timeout(600)
def test_rllib_ppo_pong_weights_replay_a_winning_policy(tmp_path):
    pytest.importorskip("torch")
    run = os.path.join(ROOT, "pong-rllib-ppo-0")
    weights = os.path.join(run, "model", "policy.pt")
    assert os.path.getsize(weights) <= 10 * 2**20, "committed weights stay <= 10 MB"
    out = subprocess.run(
        [sys.executable, "-m", "retro_atari_kit.cli", "eval", run, "--episodes", "2", "--deterministic",
         "--json"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["env_id"] == "RetroKit/Pong-v0" and result["episodes"] == 2
    # documented in results.md: arg-max games end 21 or -1; seeds 0 and 1 give -1 and 21
    assert result["mean"] > 0, result
