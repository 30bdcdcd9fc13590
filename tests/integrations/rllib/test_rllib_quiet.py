"""``retrokit train --engine rllib`` keeps Ray's own messages out of the terminal, in the run's ``log.txt``,
and its progress lines give a true score as a number or say that no game has ended yet (never ``None``).
The parts here; a real run with a real Ray is checked for both in tests/cli/test_stop_signals.py (the
RLlib run's whole life, whose resume must print nothing of Ray's)."""

from __future__ import annotations

import os

from retro_atari_kit.integrations.rllib.logs import ray_messages_into
from retro_atari_kit.integrations.rllib.training import true_score_text

from tests.cli._run import RLLIB_PROGRESS


def test_true_score_text_is_a_number_or_says_none_has_ended():
    assert true_score_text(None) == "no game finished yet"
    assert true_score_text(-20.5) == "true score -20.50"
    assert RLLIB_PROGRESS.match(f"96 steps, 64 steps/s, 0 games, {true_score_text(None)}")


def test_ray_messages_into_takes_fd_2_for_the_block_only(tmp_path, capfd):
    log = tmp_path / "log.txt"
    log.write_text("iter 1\n")
    with ray_messages_into(str(log)) as quiet:
        os.write(
            2, b"(SingleAgentEnvRunner pid=1) DeprecationWarning: ...\n"
        )  # as Ray's C++ and monitor write
    os.write(2, b"retrokit: error: after the block\n")
    assert quiet
    text = log.read_text()
    assert text.startswith("iter 1\n---- Ray's own messages, ") and "DeprecationWarning" in text
    err = capfd.readouterr().err
    assert "DeprecationWarning" not in err and "after the block" in err


def test_ray_messages_stay_where_they_are_when_the_log_cannot_be_opened(tmp_path, capfd):
    with ray_messages_into(str(tmp_path / "missing" / "log.txt")) as quiet:
        os.write(2, b"shown\n")
    assert not quiet and "shown" in capfd.readouterr().err
