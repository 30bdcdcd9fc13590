"""A run dir is data, not code: what an untrusted run dir, checkpoint or model file may hold (pickled values
that run code, weights that ask torch to run code, a compression bomb, links out of the run dir, a damaged
config.yaml) never runs, never fills memory, never leaves the run dir, and is refused in one line. Real
``retrokit`` processes on a real tiny run; the crafted payload is live (SB3's own ``load`` runs it)."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.cli._run import ENV, RETROKIT, one_error_line, retrokit

pytestmark = pytest.mark.slow


class _Marker:
    """Unpickled, it creates the file ``path`` (``open(path, "w")``): the proof that something ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def plant_pickles(model_zip: Path, marker: Path) -> None:
    """Replace every pickled value of the zip's ``data`` (policy class, spaces, schedules, ...) with one that
    creates ``marker`` when unpickled; the rest of the zip as it was."""
    import pickle

    payload = base64.b64encode(pickle.dumps(_Marker(str(marker)))).decode()
    with zipfile.ZipFile(model_zip) as zin:
        members = [(info, zin.read(info)) for info in zin.infolist()]
    with zipfile.ZipFile(model_zip, "w", zipfile.ZIP_DEFLATED) as zout:
        for info, raw in members:
            if info.filename == "data":
                data = json.loads(raw)
                for value in data.values():
                    if isinstance(value, dict) and ":serialized:" in value:
                        value[":serialized:"] = payload
                raw = json.dumps(data).encode()
            zout.writestr(info, raw)


def replace_member(model_zip: Path, name: str, write) -> None:
    """Rewrite ``name`` in the zip with ``write(file)`` (streamed: a 1 GB member never sits in memory)."""
    with zipfile.ZipFile(model_zip) as zin:
        members = [(info, zin.read(info)) for info in zin.infolist() if info.filename != name]
    with zipfile.ZipFile(model_zip, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info, raw in members:
            zout.writestr(info, raw)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with zout.open(info, "w", force_zip64=True) as fh:
            write(fh)


def zeros(n_mb: int):
    def write(fh) -> None:
        chunk = bytes(1 << 20)
        for _ in range(n_mb):
            fh.write(chunk)

    return write


@pytest.fixture
def run(tiny_run, tmp_path) -> Path:
    shutil.copytree(tiny_run, tmp_path / "run")
    return tmp_path / "run"


# --- pickled values -----------------------------------------------------------------------------------------


def test_pickled_values_in_a_run_dir_never_run(run, tmp_path):
    marker = tmp_path / "MARKER"
    for zip_path in [run / "model.zip", *sorted((run / "checkpoints").glob("*.zip"))]:
        plant_pickles(zip_path, marker)
    # the payload is live: SB3's own loader runs it
    probe = tmp_path / "probe"
    shutil.copy(run / "model.zip", tmp_path / "probe.zip")
    plant_pickles(tmp_path / "probe.zip", probe)
    load = f"from stable_baselines3 import PPO\nPPO.load({str(tmp_path / 'probe.zip')!r})"
    code = f"try:\n    exec({load!r})\nexcept Exception:\n    pass"
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    assert probe.exists()
    # the kit's loaders never unpickle: eval's and export's load (here, in this process) and a resume (the
    # command) work from config.yaml and the weights
    import numpy as np
    from retro_atari_kit.integrations.sb3.training.models import export_model, load_model

    model = load_model(str(run / "model.zip"), device="cpu")
    assert model.num_timesteps == 64 and model.predict(np.zeros((4, 84, 84), np.uint8))[0].shape == ()
    (tmp_path / "out").mkdir()
    assert export_model(str(run), str(tmp_path / "out"))[1] == 64
    res = retrokit("train", "--resume", "run", "--timesteps", "96", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (run / "checkpoints" / "model_96_steps.zip").exists()
    assert not marker.exists()


def test_a_model_file_outside_a_run_dir_is_refused_unless_allowed(run, tmp_path):
    marker = tmp_path / "MARKER"
    shutil.copy(run / "model.zip", tmp_path / "m.zip")
    plant_pickles(tmp_path / "m.zip", marker)
    line = one_error_line(
        retrokit("eval", "m.zip", "--env", ENV, cwd=tmp_path),
        "m.zip is not inside a run dir made by retrokit",
        "would unpickle 'policy_class'",
        "--allow-pickle",
    )
    assert "warning" not in line
    assert not marker.exists()
    # a clean SB3 file from someone the user trusts: loaded by SB3 after one warning
    shutil.copy(run / "model.zip", tmp_path / "clean.zip")
    res = retrokit("eval", "clean.zip", "--env", "RetroKit/Breakout-v0", "--allow-pickle", cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and "pickled code - loading it as --allow-pickle asks" in lines[0]
    assert "model expects" in lines[-1]


def test_weights_that_ask_torch_to_run_code_are_refused(run, tmp_path):
    import torch

    marker = tmp_path / "MARKER"
    buffer = io.BytesIO()
    torch.save({"features_extractor.cnn.0.weight": _Marker(str(marker))}, buffer)
    replace_member(run / "model.zip", "policy.pth", lambda fh: fh.write(buffer.getvalue()))
    one_error_line(
        retrokit("eval", "run", cwd=tmp_path),
        "run/model.zip member 'policy.pth' is not plain weights (torch refused it",
    )
    assert not marker.exists()


# --- sizes --------------------------------------------------------------------------------------------------


def test_a_compression_bomb_is_refused_before_inflating(run, tmp_path):
    """1.1 GB of zeros in ~1 MB on disk, as policy.pth: refused from the zip's directory in milliseconds,
    without memory growth; the CLI says so in one line."""
    import psutil
    from retro_atari_kit.integrations.sb3.training.models import load_model

    from retro_atari_kit.runs import RunError

    bomb = run / "checkpoints" / "model_64_steps.zip"
    replace_member(bomb, "policy.pth", zeros(1100))
    assert bomb.stat().st_size < 20 << 20  # the optimizer's state, and the bomb's ~1 MB
    process = psutil.Process()
    rss = process.memory_info().rss
    t0 = time.perf_counter()
    with pytest.raises(
        RunError, match=r"member 'policy.pth' is compressed \d+:1 .* refused before inflating"
    ):
        load_model(str(bomb), device="cpu")
    assert time.perf_counter() - t0 < 0.5
    assert process.memory_info().rss - rss < 64 << 20
    shutil.copy(bomb, run / "model.zip")
    one_error_line(retrokit("eval", "run", cwd=tmp_path), "run/model.zip member 'policy.pth' is compressed")


def test_an_oversized_data_member_is_refused(run, tmp_path):
    replace_member(run / "model.zip", "data", zeros(200))
    one_error_line(
        retrokit("eval", "run", cwd=tmp_path),
        "member 'data' would inflate to 200.0 MB",
        "refused before inflating",
    )


# --- export -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, target, needles",
    [
        ("monitor/9.monitor.csv", "secret.txt", ["run/monitor/9.monitor.csv is a link to", "secret.txt"]),
        ("monitor/resume-1", "secrets", ["run/monitor/resume-1 is a link to", "secrets"]),
        ("model.zip", "other.zip", ["run/model.zip is a link to", "other.zip"]),
    ],
)
def test_export_publishes_no_link_out_of_the_run_dir(name, target, needles, run, tmp_path):
    (tmp_path / "secret.txt").write_text("private\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "0.monitor.csv").write_text("private\n")
    shutil.copy(run / "model.zip", tmp_path / "other.zip")
    link = run / name
    if link.exists():
        link.unlink()
    link.symlink_to(tmp_path / target)
    line = one_error_line(retrokit("export", "run", "out", cwd=tmp_path), *needles)
    assert "export copies only regular files the kit wrote inside the run dir" in line
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".export-")]


# --- damaged config, plot title, environment ----------------------------------------------------------------


@pytest.mark.parametrize("field", ["env_id", "engine"])
def test_a_config_field_of_the_wrong_type_is_one_line(field, run, tmp_path):
    config = yaml.safe_load((run / "config.yaml").read_text())
    config[field] = ["a", "b"]
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    needles = [f"run/config.yaml: {field}: ['a', 'b'] is not", "restore it"]
    one_error_line(retrokit("eval", "run", cwd=tmp_path), *needles)
    one_error_line(retrokit("train", "--resume", "run", "--timesteps", "96", cwd=tmp_path), *needles)
    assert not (run / "checkpoints" / "model_96_steps.zip").exists()


def test_a_title_mathtext_cannot_parse_is_drawn_literally(run, tmp_path):
    res = retrokit("plot", "run", "--title", r"$\foo{$ 100%", "--out", "p.png", cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 0 and len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith("retrokit: warning: --title") and "not valid mathtext" in lines[0]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_an_unwritable_home_gives_no_matplotlib_warnings(run, tmp_path):
    """HOME a file (no folder can be made under it, root included), no MPLCONFIGDIR: matplotlib's two
    cache warnings are not printed, and the plot is written."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    }
    env["HOME"] = "/dev/null"
    res = subprocess.run(
        [RETROKIT, "plot", "run", "--out", "p.png"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr[-3000:]


def test_a_deleted_working_directory_is_named(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd {gone} && rmdir {gone} && exec {RETROKIT} eval {tmp_path}/run"
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=300)
    one_error_line(res, "the current directory", "was deleted", "cd to a directory that exists")
    assert "oneMKL" not in res.stderr
