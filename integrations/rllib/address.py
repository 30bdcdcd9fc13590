"""``--address``: is there a Ray head there? Answered in seconds, before Ray is started or anything written.

``ray.init(address=...)`` retries for minutes (and then waits on) anything that accepts a TCP connection:
a plain listener, Ray's dashboard (HTTP), Ray Client's port, a stale address of a cluster that is gone. So
the address is probed here, in three bounded steps, each failure one line naming the address and the fix:

1. a TCP connection (nothing listening, unknown host);
2. the HTTP/2 connection preface, to which every gRPC server (a Ray head's GCS is one) answers with a
   SETTINGS frame at once: silence is a listener that is not a Ray head, ``HTTP/1.x`` a web server;
3. the GCS's ``GetClusterId`` call (the first one ``ray.init`` makes), with a deadline: a gRPC server
   that does not know it is not a Ray head (Ray Client's port, 10001 by default, is the likely one).

With ``RAY_USE_TLS`` on, steps 2 and 3 would need Ray's certificates: only step 1 runs. ``auto`` is
resolved as ``ray.init`` resolves it (``RAY_ADDRESS``, the last local ``ray start``).
"""

from __future__ import annotations

import os
import socket

from retro_atari_kit.runs import RunError

TIMEOUT_S = 5.0
# RFC 9113 section 3.4: the client's connection preface, then its (empty) SETTINGS frame
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4  # the frame type a server's preface starts with

__all__ = ["check_address"]


def check_address(address: str | None, timeout: float = TIMEOUT_S) -> None:
    """RunError in one line unless a Ray head answers at ``address`` (``None``/``local``: no check)."""
    if address in (None, "", "local"):
        return
    if address == "auto":
        address = _resolve_auto()
        shown = f"--address auto ({address})"
    else:
        shown = str(address)
    scheme, _, rest = str(address).rpartition("://")
    if scheme not in ("", "ray"):
        return  # another scheme (a hosted service): Ray's to judge
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not host or not port.isdigit():
        raise RunError(f"--address {address!r}: expected auto or HOST:PORT (e.g. 10.0.0.1:6379)")
    head = f"`ray start --head --port {port}` there"
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as exc:
        raise RunError(
            f"cannot reach a Ray head at {shown} ({exc.strerror or exc}); start one with {head} "
            "or fix --address"
        ) from None
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        sock.close()
        return
    with sock:
        reply = _preface_reply(sock, timeout)
    if reply is None:
        raise RunError(
            f"{shown} accepts connections but does not answer as a Ray head within {timeout:g} s; pass the "
            "head's address (`ray status` on the head prints it; port 6379 unless changed)"
        )
    if reply.startswith(b"HTTP/") or any(tag in reply.lower() for tag in (b"<html", b"<!doctype")):
        raise RunError(
            f"{shown} is a web server, not a Ray head (Ray's dashboard is on 8265); pass the head's address "
            "(port 6379 unless changed)"
        )
    if len(reply) < 4 or reply[3] != _SETTINGS:
        why = "closed the connection" if not reply else f"answered {reply[:16]!r}"
        raise RunError(f"{shown} {why}: not a Ray head; pass the head's address (port 6379 unless changed)")
    if scheme != "ray":  # ray:// is Ray Client's own gRPC service: steps 1 and 2 only
        _check_gcs(shown, f"{host}:{port}", timeout)


def _resolve_auto() -> str:
    """``auto`` as ``ray.init`` resolves it; RunError if no cluster is known here."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # Ray's private helper moved: leave ``auto`` to ray.init
        return "auto"
    try:
        resolved = canonicalize_bootstrap_address("auto")
    except ConnectionError:
        resolved = None
    if not resolved:
        raise RunError(
            "--address auto: no running Ray cluster found on this host; start one with "
            "`ray start --head`, or pass --address HOST:PORT"
        )
    return str(resolved)


def _preface_reply(sock: socket.socket, timeout: float) -> bytes | None:
    """The first bytes the server sends after the HTTP/2 preface (b"" if it closed); None if silent."""
    try:
        sock.settimeout(timeout)
        sock.sendall(_PREFACE)
        return sock.recv(64)
    except TimeoutError:
        return None
    except OSError:
        return b""


def _check_gcs(shown: str, target: str, timeout: float) -> None:
    """RunError unless the gRPC server at ``target`` serves the GCS's ``GetClusterId``."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # Ray's generated stubs moved: steps 1 and 2 have passed
        return
    channel = grpc.insecure_channel(target)
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code()
        if code == grpc.StatusCode.UNIMPLEMENTED:
            raise RunError(
                f"{shown} is a gRPC service but not a Ray head (Ray Client's port? use ray://{target} for "
                "it); pass the head's address (port 6379 unless changed)"
            ) from None
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise RunError(
                f"the Ray head at {shown} does not answer ({code.name.lower()}); check it with `ray status` "
                "there, or fix --address"
            ) from None
        # anything else (e.g. UNAUTHENTICATED) came from a GCS: a Ray head, whose own error ray.init reports
    finally:
        channel.close()
