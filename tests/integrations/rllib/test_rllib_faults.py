"""The RLlib engine's faults, as a user meets them through ``retrokit`` (real subprocesses, real sockets, a
real Ray head, the real ALE emulator):

- a run on a real Ray head given by ``--address`` (``--resume`` with the relative run dir the kit printed:
  ``tests/cli/test_stop_signals.py``);
- ``--address`` at something that is not a Ray head (a plain listener, a web server, a gRPC service that is
  not Ray's, a closed port) is one line at once, never a hang;
- a bad RLlib setting is one line before Ray starts: no Ray session, no run dir;
- a checkpoint whose module differs from config.yaml's network is refused in one line, before Ray.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from concurrent import futures

import pytest
from retro_atari_kit.integrations.rllib.address import check_address
from retro_atari_kit.integrations.rllib.nets import build_encoder, build_heads
from retro_atari_kit.integrations.rllib.policy import policy_payload
from retro_atari_kit.integrations.rllib.resume import check_checkpoint_network

from retro_atari_kit.runs import RunError, list_checkpoints
from tests.cli._run import RLLIB_TINY

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"
SMALL = [*RLLIB_TINY, "--checkpoint-every", "0"]
HANG = 150  # s: far more than any refusal takes here; ray.init at a non-head retries for minutes


def retrokit(*args: str, cwd, env: dict | None = None, timeout: float = HANG) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "retro_atari_kit.cli", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )  # fmt: skip


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refusal (exit 2)."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr[-3000:])
    assert lines[0].startswith("retrokit: error: ")
    return lines[0]


# ---- a real Ray head given by --address ---------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_head():
    from ray.cluster_utils import Cluster

    # the driver (`retrokit train`, in a subprocess) connects with --address: one Ray start for the module
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        yield cluster.address
    finally:
        cluster.shutdown()


@pytest.mark.timeout(600)
def test_a_run_on_a_ray_head_given_by_address(ray_head, tmp_path):
    check_address(ray_head)  # a real head passes the --address probe
    first = retrokit("train", "appo", ENV, "--address", ray_head, "--timesteps", "64", "--run-dir", "runs/x",
                     *SMALL, cwd=tmp_path, timeout=300)  # fmt: skip
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "-> runs/x" in first.stdout
    steps, newest = list_checkpoints(str(tmp_path / "runs" / "x"))[-1]
    assert steps >= 64 and os.path.isfile(os.path.join(newest, "policy.pt"))


# ---- --address at something that is not a Ray head ----------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request log on the test's stderr
        pass


@pytest.fixture(params=["tcp-listener", "http-server", "grpc-not-ray", "closed-port"])
def not_a_head(request):
    """``(address, words the error line must hold)`` of a real local service that is not a Ray head."""
    kind = request.param
    if kind == "tcp-listener":  # accepts (the kernel completes the handshake) and never says a word
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            yield f"127.0.0.1:{sock.getsockname()[1]}", "does not answer as a Ray head"
    elif kind == "http-server":  # e.g. Ray's own dashboard port
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"127.0.0.1:{server.server_address[1]}", "web server"
        finally:
            server.shutdown()
            server.server_close()
    elif kind == "grpc-not-ray":  # e.g. Ray Client's port: gRPC, but no GCS behind it
        import grpc

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            yield f"127.0.0.1:{port}", "gRPC service but not a Ray head"
        finally:
            server.stop(0)
    else:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        yield f"127.0.0.1:{port}", "cannot reach a Ray head"


@pytest.mark.timeout(300)
def test_an_address_that_is_not_a_ray_head_is_one_line_not_a_hang(not_a_head, tmp_path):
    address, words = not_a_head
    proc = retrokit("train", "appo", ENV, *SMALL, "--address", address, "--timesteps", "64", "--run-dir", "r",
                    cwd=tmp_path, env={"RAY_TMPDIR": str(tmp_path / "ray")})  # fmt: skip
    line = error_line(proc)
    assert address in line and words in line, line
    assert not (tmp_path / "r").exists() and not (tmp_path / "ray").exists()


# ---- RLlib settings: refused before Ray starts --------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "algo, item, words",
    [
        ("appo", "circular_buffer_num_batches=0", "circular_buffer_num_batches must be >= 1"),
        ("dqn", "replay_buffer_config={capacity: 0}", "replay_buffer_config.capacity must be >= 1"),
        ("ppo", "gamma=abc", "gamma must be a number"),
        ("impala", "entropy_coeff=[[0, 0.02], [1e6, -1]]", "entropy_coeff must be >= 0"),
        ("ppo", "minibatch_size=100000", "RLlib refuses the settings: `minibatch_size` (100000)"),
        ("dqn", "num_atoms=51", "not distributional"),
    ],
)
def test_a_bad_rllib_setting_is_refused_before_ray_starts(algo, item, words, tmp_path):
    argv = ["train", algo, ENV, "--engine", "rllib", "--set", item, "--timesteps", "64", "--run-dir", "r"]
    proc = retrokit(*argv, cwd=tmp_path, env={"RAY_TMPDIR": str(tmp_path / "ray")})
    assert words in error_line(proc)
    assert proc.stdout == ""
    assert not (tmp_path / "r").exists(), "no run dir"
    assert not (tmp_path / "ray").exists(), "no Ray session was started"


# ---- the checkpoint's module against config.yaml (no Ray) ----------------------------------------------


def test_resume_of_a_checkpoint_of_another_network_is_one_line(tmp_path):
    import torch

    from retro_atari_kit.runs import TrainSpec, checkpoint_path
    from retro_atari_kit.runs.startup import prepare_new_run

    # a run dir as `retrokit train appo ...` writes it (its checks start no Ray), with one checkpoint whose
    # policy.pt holds a Nature-CNN module, as save_checkpoint writes it
    spec = TrainSpec(algo="appo", env_id=ENV, engine="rllib", network="nature", timesteps=64,
                     run_dir=str(tmp_path / "runs" / "x"), engine_options={"num_env_runners": 1})  # fmt: skip
    _, run = prepare_new_run(spec, out=lambda line: None)
    ckpt = checkpoint_path(run, 64, suffix="")
    os.makedirs(ckpt)
    torch.save(_payload("nature", False, False, algo="appo"), os.path.join(ckpt, "policy.pt"))
    config = os.path.join(run, "config.yaml")
    with open(config) as fh:
        text = fh.read()
    with open(config, "w") as fh:
        fh.write(text.replace("network: nature", "network: impala"))
    before = sorted(os.listdir(run)), os.path.getmtime(config)

    proc = retrokit("train", "--resume", "runs/x", "--timesteps", "256", cwd=tmp_path,
                    env={"RAY_TMPDIR": str(tmp_path / "ray")})  # fmt: skip
    line = error_line(proc)
    assert "says network impala" in line and "network: nature back in config.yaml" in line, line
    assert (sorted(os.listdir(run)), os.path.getmtime(config)) == before, "nothing written"
    assert not (tmp_path / "ray").exists(), "no Ray session was started"


def _payload(network: str, q_learning: bool, dueling: bool, algo: str = "", **encoder_kwargs) -> dict:
    """What ``save_checkpoint`` writes to ``policy.pt``, for a freshly built module."""
    encoder = build_encoder(network, (4, 84, 84), **encoder_kwargs)
    state = {f"encoder.{k}": v for k, v in encoder.state_dict().items()}
    for name, head in build_heads(encoder.features_dim, 6, q_learning, dueling).items():
        state.update({f"{name}.{k}": v for k, v in head.state_dict().items()})
    model = {
        "network": network,
        "q_learning": q_learning,
        "dueling": dueling,
        "encoder_kwargs": encoder_kwargs,
    }
    algo = algo or ("dqn" if q_learning else "ppo")
    return policy_payload(state, model, (4, 84, 84), 6, algo, ENV, 64)


@pytest.mark.parametrize(
    "held, config, field",
    [
        (("impala", False, False), {"network": "nature"}, "network"),
        (("nature", True, True), {"network": "nature", "q_learning": True, "dueling": False}, "dueling"),
        (("nature", False, False, 256), {"network": "nature", "encoder_kwargs": {}}, "encoder_kwargs"),
    ],
)
def test_a_checkpoint_of_another_module_is_refused(held, config, field):
    network, q_learning, dueling, *features = held
    payload = _payload(network, q_learning, dueling, **({"features_dim": features[0]} if features else {}))
    own = {
        "network": network,
        "q_learning": q_learning,
        "dueling": dueling,
        "encoder_kwargs": payload["encoder_kwargs"],
    }
    check_checkpoint_network("ckpt", payload, own)  # the module it holds passes
    with pytest.raises(RunError) as err:
        check_checkpoint_network("ckpt", payload, config)
    assert field in str(err.value) and "ckpt" in str(err.value) and "\n" not in str(err.value)
