"""``retrokit train --engine rllib`` (and its ``--resume``) on a machine where another Ray cluster already
runs, set up as Ray's docs do (``ray start --head``; its address recorded for ``ray.init()`` to find, or
exported as ``RAY_ADDRESS``): the run starts its own local Ray beside it and never joins it by accident
(Ray used to refuse the kit's ``num_cpus`` with "When connecting to an existing cluster ...").

The other cluster is real and lives in its own Ray temp dir (``RAY_TMPDIR``), and teardown stops only its
processes: ``ray stop`` would stop every Ray on the machine, another user's job included, the very
neighbour this test is about.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import ray.rllib  # noqa: F401  (the rllib extra: a broken install fails here, never skips)

from retro_atari_kit.runs import list_checkpoints
from tests.cli._run import RLLIB_TINY

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"
SMALL = [*RLLIB_TINY, "--checkpoint-every", "0"]
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def other_cluster():
    """A running one-CPU Ray head of "another job": ``(RAY_TMPDIR, its address)``."""
    # short: Ray's unix sockets live under it (at most 107 characters)
    tmpdir = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")
    port = _free_port()
    env = {**os.environ, "RAY_TMPDIR": tmpdir}
    log = open(os.path.join(tmpdir, "ray-start.log"), "w")  # noqa: SIM115 - closed below
    head = subprocess.Popen(
        [RAY, "start", "--head", "--num-cpus=1", f"--port={port}", "--include-dashboard=false",
         "--disable-usage-stats", "--block"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        recorded = os.path.join(tmpdir, "ray", "ray_current_cluster")  # what ray.init() looks for
        deadline = time.monotonic() + 120
        while not os.path.exists(recorded):
            assert head.poll() is None, open(log.name).read()[-3000:]
            assert time.monotonic() < deadline, "ray start --head did not come up in 120 s"
            time.sleep(0.2)
        yield tmpdir, f"127.0.0.1:{port}"
        assert head.poll() is None, "the other job's cluster died while the kit trained beside it"
    finally:
        # its own process group: the blocking `ray start` and what it started (GCS, raylet, workers)
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        log.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def _retrokit(*args: str, cwd, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "retro_atari_kit.cli", *args], cwd=cwd, capture_output=True, text=True,
        timeout=480, env={**os.environ, "OMP_NUM_THREADS": "1", **env},
    )  # fmt: skip


@pytest.mark.timeout(900)
def test_rllib_train_and_resume_start_their_own_ray_beside_another_cluster(other_cluster, tmp_path):
    tmpdir, address = other_cluster
    sessions_before = set(glob.glob(os.path.join(tmpdir, "ray", "session_2*")))
    # ray.init() would find the other cluster through RAY_TMPDIR's ray_current_cluster file
    first = _retrokit("train", "appo", ENV, "--timesteps", "64", "--run-dir", "run", *SMALL,
                      cwd=tmp_path, env={"RAY_TMPDIR": tmpdir})  # fmt: skip
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "num_cpus and num_gpus must not be provided" not in first.stderr
    sessions_after = set(glob.glob(os.path.join(tmpdir, "ray", "session_2*")))
    assert len(sessions_after - sessions_before) == 1  # a Ray session of its own, beside the other one
    # ... and through RAY_ADDRESS, as another job's shell would export it; APPO samples asynchronously, so
    # the first run may have trained past its 64 steps (160 seen): the new total is counted from its own
    trained, _ = list_checkpoints(str(tmp_path / "run"))[-1]
    resumed = _retrokit("train", "--resume", "run", "--timesteps", str(trained + 64), cwd=tmp_path,
                        env={"RAY_TMPDIR": tmpdir, "RAY_ADDRESS": address})  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    steps, _ = list_checkpoints(str(tmp_path / "run"))[-1]
    assert steps >= trained + 64
