"""ROM status, automatic install of ale-py's ROMs and ``import_roms`` (real ROM files, temp data dirs).

Each test points ``RETRO_DATA_PATH`` at a temporary copy of a few stable-retro integration folders
(without ROMs), so the real installation is never modified.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from retro_atari_kit.catalog.retro import retro_data_dir, retro_games
from retro_atari_kit.envs.retro import make_retro_env
from retro_atari_kit.roms import (
    RomNotFoundError,
    ale_rom_hashes,
    ale_source,
    ensure_rom,
    format_import_report,
    import_roms,
    install_rom,
    retro_rom_statuses,
    rom_status,
)

GAMES = ["Pong-Atari2600-v0", "Breakout-Atari2600-v0", "SonicTheHedgehog-Genesis-v0"]


def _sha1(path):
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


def _ale_rom(name):
    return next(p for p in ale_rom_hashes().values() if p.name == name)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A stable-retro data dir holding copies of a few integration folders, none with a ROM."""
    real = retro_data_dir()
    target = tmp_path / "retro-data"
    for folder in GAMES:
        shutil.copytree(real / "stable" / folder, target / "stable" / folder)
        for rom in (target / "stable" / folder).glob("rom.*"):
            if rom.name != "rom.sha":
                rom.unlink()
    monkeypatch.setenv("RETRO_DATA_PATH", str(target))
    return target


def test_ale_py_ships_32_roms_matching_stable_retro_games():
    atari = [g for g in retro_games() if g.system == "Atari2600"]
    matched = [g.name for g in atari if ale_source(g) is not None]
    assert len(matched) == 32
    assert {"Pong-Atari2600", "Breakout-Atari2600", "Boxing-Atari2600"} <= set(matched)


def test_status_without_hashing_installed_files(data_dir):
    assert rom_status("Pong-Atari2600") == "ale-py"
    assert rom_status("SonicTheHedgehog-Genesis") == "missing"
    statuses = dict(retro_rom_statuses())
    assert statuses == {
        "RetroKit/Breakout-Atari2600-v0": "ale-py",
        "RetroKit/Pong-Atari2600-v0": "ale-py",
        "RetroKit/SonicTheHedgehog-Genesis-v0": "missing",
    }
    ensure_rom("Pong-Atari2600")
    assert rom_status("Pong-Atari2600") == "installed"


def test_missing_rom_error_names_game_sha_and_command(data_dir):
    sha = (data_dir / "stable" / "SonicTheHedgehog-Genesis-v0" / "rom.sha").read_text().split()[0]
    with pytest.raises(RomNotFoundError) as info:
        make_retro_env("SonicTheHedgehog-Genesis")
    message = str(info.value)
    assert "SonicTheHedgehog-Genesis" in message and sha in message and "retrokit import-roms" in message
    assert isinstance(info.value, FileNotFoundError)


def test_mismatched_data_is_never_installed(data_dir):
    folder = data_dir / "stable" / "Pong-Atari2600-v0"
    good = _ale_rom("pong.bin").read_bytes()
    for bad in [good[:-1], good[:100] + b"\0" + good[101:], _ale_rom("breakout.bin").read_bytes()]:
        with pytest.raises(ValueError, match="not the Pong-Atari2600 ROM"):
            install_rom("Pong-Atari2600", bad)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(("rom.a26", ".rom-"))) == []
    path = install_rom("Pong-Atari2600", good)
    assert path == folder / "rom.a26" and _sha1(path) == _sha1(_ale_rom("pong.bin"))


def test_import_a_folder_with_one_real_rom_a_zip_and_junk(data_dir, tmp_path):
    roms = tmp_path / "my roms"
    (roms / "nested").mkdir(parents=True)
    shutil.copy(_ale_rom("pong.bin"), roms / "Video Olympics (1977).a26")
    (roms / "notes.txt").write_text("not a rom")
    (roms / "nested" / "truncated.bin").write_bytes(_ale_rom("breakout.bin").read_bytes()[:-7])
    with zipfile.ZipFile(roms / "pack.zip", "w") as archive:
        archive.write(_ale_rom("breakout.bin"), "Breakout.bin")
        archive.writestr("readme.md", "junk")
    (roms / "broken.zip").write_bytes(b"PK\x03\x04 broken")

    report = import_roms(roms)

    assert sorted(item.game for item in report.imported) == ["Breakout-Atari2600", "Pong-Atari2600"]
    sources = {item.game: item.source for item in report.imported}
    assert sources["Breakout-Atari2600"].endswith("pack.zip:Breakout.bin")
    reasons = {os.path.relpath(s.source, roms): s.reason for s in report.skipped}
    assert "no stable-retro game" in reasons["notes.txt"]
    assert "no stable-retro game" in reasons[os.path.join("nested", "truncated.bin")]
    assert "no stable-retro game" in reasons["pack.zip:readme.md"]
    assert "members were checked" in reasons["pack.zip"]
    assert "broken.zip" in reasons
    for folder, rom in [("Pong-Atari2600-v0", "pong.bin"), ("Breakout-Atari2600-v0", "breakout.bin")]:
        assert _sha1(data_dir / "stable" / folder / "rom.a26") == _sha1(_ale_rom(rom))
    assert not list(data_dir.rglob(".rom-*"))

    text = format_import_report(report)
    assert "imported  Pong-Atari2600" in text and "imported  Breakout-Atari2600" in text
    assert "notes.txt" in text and "2 ROM(s) imported" in text

    again = import_roms(roms)
    assert again.imported == []
    assert sum("already installed" in s.reason for s in again.skipped) == 2


def test_import_replaces_a_corrupt_installed_rom(data_dir, tmp_path):
    target = data_dir / "stable" / "Pong-Atari2600-v0" / "rom.a26"
    target.write_bytes(b"corrupt")
    shutil.copy(_ale_rom("pong.bin"), tmp_path / "pong.a26")
    report = import_roms(tmp_path / "pong.a26")
    assert [i.game for i in report.imported] == ["Pong-Atari2600"]
    assert _sha1(target) == _sha1(_ale_rom("pong.bin"))


def test_import_expands_the_home_directory(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "roms").mkdir()
    shutil.copy(_ale_rom("pong.bin"), tmp_path / "roms" / "pong.a26")
    report = import_roms("~/roms")
    assert [i.game for i in report.imported] == ["Pong-Atari2600"]


def test_import_of_a_missing_path_raises():
    with pytest.raises(FileNotFoundError, match="no such file"):
        import_roms("/nonexistent/roms")


def test_ale_rom_is_installed_once_and_the_env_says_so(data_dir):
    # stable-retro reads RETRO_DATA_PATH once per process: a fresh interpreter per run
    code = (
        "import retro_atari_kit, gymnasium as gym\n"
        "env = gym.make('RetroKit/Pong-Atari2600-v0')\n"
        "obs, _ = env.reset(seed=0)\n"
        "env.step(0)\n"
        "assert obs.shape == (4, 84, 84)\n"
        "env.close()\n"
    )
    env = {**os.environ, "RETRO_DATA_PATH": str(data_dir)}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "installed the Pong-Atari2600 ROM from ale-py" in first.stderr
    assert _sha1(data_dir / "stable" / "Pong-Atari2600-v0" / "rom.a26") == _sha1(_ale_rom("pong.bin"))
    second = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert "installed" not in second.stderr
