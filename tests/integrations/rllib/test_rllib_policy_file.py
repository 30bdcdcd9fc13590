"""An RLlib run's ``policy.pt`` is data: one that torch.save did not write, or that holds something else than
the kit's payload, is one error line naming the file (no traceback, no torch warning before it), for
``retrokit eval`` of the run dir or the file (the committed RLlib agent, copied, its policy replaced)."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN = os.path.join(ROOT, "results", "pong-rllib-ppo-3m-0")

DAMAGED = {
    "a plain pickle": (lambda path: open(path, "wb").write(pickle.dumps({"a": 1}, protocol=4)), "torch.save"),
    "a torch file of another kind": (lambda path: torch.save([1, 2], path), "not the kit's policy payload"),
}


@pytest.mark.parametrize("target", ["", "model/policy.pt"], ids=["run dir", "policy file"])
@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_policy_file_that_is_not_the_kits_is_one_error_line(damage, target, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    write, words = DAMAGED[damage]
    write(str(run / "model" / "policy.pt"))
    proc = subprocess.run(
        [sys.executable, "-m", "retro_atari_kit.cli", "eval", str(run / target), "--episodes", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert (
        lines[0].startswith(f"retrokit: error: cannot read {run / 'model' / 'policy.pt'}: ")
        and words in lines[0]
    )


@pytest.mark.parametrize(
    "write, reason",
    [
        (lambda path: open(path, "w").write("text"), "not a file torch.save wrote"),
        (
            lambda path: torch.save({"steps": 64, "algo": "ppo"}, path),
            "its payload lacks a readable 'obs_shape'",
        ),
        (
            lambda path: torch.save(
                {"steps": 64, "algo": "ppo", "obs_shape": [4, 84, 84], "n_actions": None}, path
            ),
            "its payload lacks a readable 'n_actions'",
        ),
    ],
    ids=["text", "no obs_shape", "n_actions of the wrong kind"],
)
def test_a_damaged_checkpoint_policy_names_its_reason_and_what_to_do(write, reason, tmp_path):
    from retro_atari_kit.integrations.rllib.resume import checkpoint_payload

    from retro_atari_kit.errors import RunError

    checkpoint = tmp_path / "checkpoint_000064"
    checkpoint.mkdir()
    write(str(checkpoint / "policy.pt"))
    with pytest.raises(RunError) as err:
        checkpoint_payload(str(checkpoint))
    message = str(err.value)
    assert message.startswith(f"cannot read checkpoint {checkpoint / 'policy.pt'}: ") and reason in message
    assert message.endswith(f"; delete {checkpoint} to resume from the previous one") and "\n" not in message
