"""Session fixtures of the sweep: built once per test process, recorded in ``_sweep.FIXTURE`` for the cases'
setups (copied per case, never used in place)."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.cli._run import CHILD_ENV, ENV, RETROKIT, RLLIB_TINY
from tests.sweep._sweep import FIXTURE

TINY = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]
RLLIB_SMALL = [*RLLIB_TINY, "--checkpoint-every", "0"]


def _train(base, *argv: str) -> str:
    res = subprocess.run(
        [RETROKIT, "train", *argv, "--run-dir", "run", "--timesteps", "64"],
        cwd=base, capture_output=True, text=True, env=CHILD_ENV, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, f"could not train the sweep's run:\n{res.stderr[-3000:]}"
    return str(base / "run")


def _missing_rom_id(base) -> str:
    """A stable-retro ID whose ROM is absent here (from ``retrokit list --system nes``)."""
    res = subprocess.run(
        [RETROKIT, "list", "--system", "nes"], cwd=base, capture_output=True, text=True, env=CHILD_ENV
    )
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "missing":
            return parts[0]
    raise AssertionError("no NES game with a missing ROM: the missing-ROM cases need one")


@pytest.fixture(scope="session")
def sweep(tmp_path_factory) -> dict[str, str]:
    """A finished 64-step PPO run on Pong with checkpoints at 32 and 64 steps, and a missing ROM's ID."""
    if "run" not in FIXTURE:
        base = tmp_path_factory.mktemp("sweep-fixture")
        FIXTURE["run"] = _train(base, "ppo", ENV, *TINY, "--checkpoint-every", "32")
        FIXTURE["missing_rom"] = _missing_rom_id(base)
    return FIXTURE


@pytest.fixture(scope="session")
def sweep_rllib_run(sweep, tmp_path_factory) -> str:
    """A finished 64-step APPO run (real Ray)."""
    if "rllib_run" not in FIXTURE:
        FIXTURE["rllib_run"] = _train(tmp_path_factory.mktemp("sweep-rllib"), "appo", ENV, *RLLIB_SMALL)
    return FIXTURE["rllib_run"]


@pytest.fixture(scope="session")
def not_ray_heads(sweep) -> Iterator[dict[str, str]]:
    """``--address`` targets that are not a Ray head: a TCP listener that never answers, a web server, a
    gRPC server without Ray's GCS, a closed port (``{address:KIND}`` in a case's argv)."""
    import grpc

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # the kernel completes connections; nothing ever reads or writes

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    rpc = grpc.server(ThreadPoolExecutor(max_workers=1))
    rpc_port = rpc.add_insecure_port("127.0.0.1:0")
    rpc.start()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
    addresses = {
        "listener": f"127.0.0.1:{listener.getsockname()[1]}",
        "web": f"127.0.0.1:{web.server_address[1]}",
        "grpc": f"127.0.0.1:{rpc_port}",
        "closed": f"127.0.0.1:{closed_port}",
    }
    FIXTURE.update({f"address:{kind}": address for kind, address in addresses.items()})
    try:
        yield addresses
    finally:
        rpc.stop(None)
        web.shutdown()
        web.server_close()
        listener.close()
