"""Checkpoint signatures (retro_atari_kit.runs.signatures): only folders this user's kit wrote, unchanged,
verify; a copy from another user (another key), an edited file, an added file or a link do not."""

from __future__ import annotations

import pytest

from retro_atari_kit.runs import RunError
from retro_atari_kit.runs.signatures import SIGNATURE_FILE, check_signed, key_path, sign_checkpoint


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


def _checkpoint(folder):
    (folder / "learner").mkdir(parents=True)
    (folder / "learner" / "state.pkl").write_bytes(b"\x80\x04N.")
    (folder / "policy.pt").write_bytes(b"weights")
    return folder


def test_a_signed_checkpoint_verifies_and_any_change_does_not(tmp_path, data_home):
    ckpt = _checkpoint(tmp_path / "ckpt")
    assert sign_checkpoint(str(ckpt))
    assert (data_home / "retrokit" / "checkpoint-key").stat().st_mode & 0o777 == 0o600
    assert key_path() == str(data_home / "retrokit" / "checkpoint-key")
    check_signed(str(ckpt))
    (ckpt / "learner" / "state.pkl").write_bytes(b"\x80\x04crm\n.")  # an untrusted pickle swapped in
    with pytest.raises(RunError, match="no valid signature.*pickle, which can run code"):
        check_signed(str(ckpt))


@pytest.mark.parametrize("change", ["unsigned", "added", "link", "other user"])
def test_what_does_not_verify(change, tmp_path, data_home, monkeypatch):
    ckpt = _checkpoint(tmp_path / "ckpt")
    if change != "unsigned":
        sign_checkpoint(str(ckpt))
    if change == "added":
        (ckpt / "learner" / "extra.pkl").write_bytes(b"x")
    elif change == "link":
        (ckpt / "learner" / "l.pkl").symlink_to(tmp_path)
    elif change == "other user":
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "someone-else"))
        sign_checkpoint(str(tmp_path / "unused") if (tmp_path / "unused").mkdir() is None else "")
    with pytest.raises(RunError, match="was not written by retrokit as this user here"):
        check_signed(str(ckpt))
    assert change == "unsigned" or (ckpt / SIGNATURE_FILE).exists()
