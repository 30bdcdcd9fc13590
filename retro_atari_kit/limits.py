"""What an env, a vector env or a buffer will need, against what this process may use: refused in one line,
before anything is allocated or started, naming the limit.

The limits read are the ones that kill a process, not the host's totals: the memory of the process's cgroup
(v2 ``memory.max`` - ``memory.current``, v1 ``memory.limit_in_bytes`` - ``memory.usage_in_bytes``, the
tightest of its cgroup and the cgroups above it: a container, a Slurm job, a systemd unit), its address
space (``RLIMIT_AS``, ``ulimit -v``), its process count (``RLIMIT_NPROC``, the cgroup's ``pids.max``), the
free space of ``/dev/shm`` (shared memory is a tmpfs: a full one kills the writer with SIGBUS), and the
host's ``MemAvailable``. The cgroup readers take the root and the ``/proc/self/cgroup`` text as arguments, so
they can be pointed at a tree laid out like ``/sys/fs/cgroup``.

The per-env figures are measured (docs/vectorization.md, "Limits"); what no measure can judge in time (a
screen larger than any emulator's) is capped by the constants below.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass

#: the largest observation side: emulator screens are at most 256x320, so a larger one only repeats pixels
MAX_SCREEN_SIZE = 1024
#: the most frames one observation may stack (the kit's default is 4; long-memory setups use 16-64)
MAX_FRAME_STACK = 1024
#: the most envs one vector env may hold (more do not step faster on one machine; spread them over
#: machines, e.g. RLlib's env runners)
MAX_NUM_ENVS = 4096
#: memory each env adds beside its observations (measured: ~1.8 MB for an ALE env in one process)
ENV_BYTES = 2 << 20
#: memory each worker process adds (measured unique set size: ~30 MB per subprocess-backend worker,
#: ~77 MB per native shard of 2 envs)
WORKER_BYTES = 32 << 20
SHARD_BYTES = 80 << 20
#: copies of one observation an env costs: its stack, the copy returned, and gymnasium's Box of it (a low and
#: a high array of the observation's shape, and two bool arrays of that shape while it checks them)
OBS_COPIES = 8
#: shared memory multiprocessing needs beside the frames (semaphores, the heap of shared values)
SHM_SPARE = 1 << 20
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1


class LimitError(ValueError):
    """A request for more than this process may use; its message is one line naming the limit."""


class OutOfMemoryError(LimitError, MemoryError):
    """An allocation that failed (numpy's ``_ArrayMemoryError``), said in one line with the limit behind it:
    still a MemoryError for callers that catch one, and a ValueError for the CLI's one-line errors."""


@dataclass(frozen=True)
class Headroom:
    """Bytes (or processes) still available, and which limit sets that figure."""

    amount: int
    limit: str


def size_text(n: float) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


# -- cgroups -------------------------------------------------------------------------------------------------
def _read_int(path: str) -> int | None:
    """An integer control file (``max`` and v1's huge "no limit" as None); None if absent or unreadable."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= _UNLIMITED else value


def _own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """``{controller: path}`` of ``/proc/self/cgroup`` text; the v2 unified hierarchy as ``""``."""
    found: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            found.setdefault(controller, path)
    return found


def _levels(base: str, path: str) -> list[str]:
    """The cgroup directories from the process's own up to the hierarchy's root (those that exist here:
    inside a container's namespace, the path above the container is not mounted)."""
    parts = [p for p in path.strip("/").split("/") if p and p != ".."]
    dirs = [os.path.join(base, *parts[:k]) for k in range(len(parts), -1, -1)]
    return [d for d in dirs if os.path.isdir(d)]


def cgroup_headroom(
    resource_name: str = "memory", root: str = "/sys/fs/cgroup", proc_cgroup: str | None = None
) -> Headroom | None:
    """The tightest cgroup limit on ``resource_name`` (``"memory"`` in bytes, ``"pids"`` in processes) of
    this process (or of the ``proc_cgroup`` text), minus what is in use; None where no limit is set.

    v2: ``<root>/<path>/memory.max`` and ``memory.current`` (``pids.max``, ``pids.current``); v1:
    ``<root>/memory/<path>/memory.limit_in_bytes`` and ``memory.usage_in_bytes`` (``<root>/pids/...``)."""
    if proc_cgroup is None:
        try:
            with open("/proc/self/cgroup", encoding="utf-8") as fh:
                proc_cgroup = fh.read()
        except OSError:
            return None
    own = _own_cgroups(proc_cgroup)
    files = {
        ("memory", 1): ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        ("memory", 2): ("memory.max", "memory.current"),
        ("pids", 1): ("pids.max", "pids.current"),
        ("pids", 2): ("pids.max", "pids.current"),
    }
    candidates = []
    if resource_name in own:  # v1: one hierarchy per controller
        candidates.append((1, os.path.join(root, resource_name), own[resource_name]))
    if "" in own and os.path.exists(os.path.join(root, "cgroup.controllers")):  # v2: one unified tree
        candidates.append((2, root, own[""]))
    best: Headroom | None = None
    for version, base, path in candidates:
        limit_file, usage_file = files[(resource_name, version)]
        for level in _levels(base, path):
            limit = _read_int(os.path.join(level, limit_file))
            if limit is None:
                continue
            used = _read_int(os.path.join(level, usage_file)) or 0
            room = Headroom(max(limit - used, 0), f"cgroup v{version} {os.path.join(level, limit_file)}")
            if best is None or room.amount < best.amount:
                best = room
    return best


# -- memory --------------------------------------------------------------------------------------------------
def _meminfo_available(meminfo: str = "/proc/meminfo") -> int | None:
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_headroom() -> Headroom | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return Headroom(max(soft - used, 0), f"RLIMIT_AS (ulimit -v {soft // 1024})")


def available_memory(root: str = "/sys/fs/cgroup") -> Headroom:
    """What this process may still allocate: the least of the host's MemAvailable, its cgroups' headroom
    and its address space's headroom (``RLIMIT_AS``)."""
    found = [
        Headroom(avail, "the host's MemAvailable") for avail in [_meminfo_available()] if avail is not None
    ]
    for room in (cgroup_headroom("memory", root), _address_space_headroom()):
        if room is not None:
            found.append(room)
    if not found:  # not Linux: psutil knows the platform's figure
        import psutil

        found.append(Headroom(int(psutil.virtual_memory().available), "the host's available memory"))
    return min(found, key=lambda room: room.amount)


def check_memory(what: str, need: int, fix: str, room: Headroom | None = None) -> None:
    """LimitError unless ``need`` bytes fit in :func:`available_memory` (or ``room``)."""
    room = room or available_memory()
    if need > room.amount:
        raise LimitError(
            f"{what} needs ~{size_text(need)} of memory but this process may use {size_text(room.amount)} "
            f"more ({room.limit}); {fix}"
        )


# -- processes -----------------------------------------------------------------------------------------------
def process_headroom(root: str = "/sys/fs/cgroup") -> Headroom | None:
    """How many more processes this user may start: the cgroup's ``pids.max`` headroom and the soft
    ``RLIMIT_NPROC`` (a count per user, compared with this user's processes), the least; None if no limit."""
    found = [room for room in [cgroup_headroom("pids", root)] if room is not None]
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        try:
            import psutil

            uid = os.getuid()
            mine = sum(
                1 for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid
            )
        except Exception:  # noqa: BLE001 - a count we cannot take: the limit alone
            mine = 0
        found.append(Headroom(max(soft - mine, 0), f"RLIMIT_NPROC (ulimit -u {soft})"))
    return min(found, key=lambda room: room.amount) if found else None


def check_processes(what: str, count: int, fix: str, room: Headroom | None = None) -> None:
    """LimitError unless ``count`` more processes may start."""
    room = room if room is not None else process_headroom()
    if room is not None and count > room.amount:
        raise LimitError(
            f"{what} starts {count} processes but this user may start {room.amount} more "
            f"({room.limit}); {fix}"
        )


# -- shared memory -------------------------------------------------------------------------------------------
def shm_headroom(directory: str = "/dev/shm") -> Headroom | None:
    """Free bytes of the tmpfs behind POSIX shared memory (``directory``); None where there is none."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return Headroom(st.f_bavail * st.f_frsize, f"free space of {directory}")


def check_shared_memory(what: str, size: int, directory: str = "/dev/shm") -> None:
    """LimitError unless a segment of ``size`` bytes fits in ``directory``: a mapping larger than its free
    space is created (sparse) but kills its first writer with SIGBUS once the tmpfs is full."""
    room = shm_headroom(directory)
    if room is not None and size > room.amount:
        raise LimitError(
            f"{what} needs {size_text(size)} of shared memory but {directory} has {size_text(room.amount)} "
            "free; give it more (Docker: --shm-size=2g; Kubernetes: an emptyDir with medium: Memory on "
            f"{directory}), free it, or use fewer envs"
        )


# -- envs ----------------------------------------------------------------------------------------------------
def observation_bytes(options: dict) -> int:
    """Bytes of one observation of an env with these resolved options (uint8 frames, stacked)."""
    channels = 1 if options.get("grayscale", True) else 3
    size = int(options.get("screen_size", 84))
    return int(options.get("frame_stack", 4)) * channels * size * size


def check_env_options(env_id: str, options: dict) -> None:
    """LimitError for an observation no machine should be asked for (the caps above) or more than this
    process may hold; call with the resolved options, before the env is built."""
    size, stack = options.get("screen_size"), options.get("frame_stack")
    if isinstance(size, int) and size > MAX_SCREEN_SIZE:
        raise LimitError(
            f"{env_id}: screen_size={size} is more than the kit's limit of {MAX_SCREEN_SIZE} (emulator "
            "screens are at most 256x320: a larger side only repeats pixels); use 84 (the default) or less"
        )
    if isinstance(stack, int) and stack > MAX_FRAME_STACK:
        raise LimitError(
            f"{env_id}: frame_stack={stack} is more than the kit's limit of {MAX_FRAME_STACK} frames; "
            "use 4 (the default) or a few dozen"
        )
    obs = observation_bytes(options)
    check_memory(
        f"{env_id} with observations of {size_text(obs)}",
        OBS_COPIES * obs + ENV_BYTES,
        "lower frame_stack or screen_size",
    )


def check_vector_env(env_id: str, num_envs: int, backend: str, options: dict, processes: int) -> None:
    """LimitError unless ``num_envs`` envs on ``backend`` fit: ``processes`` worker processes (the
    subprocess backend: one per env; native shards: one per shard), their memory and the envs', and the
    shared memory their frames cross through. Call before any worker starts."""
    obs = observation_bytes(options)
    what = f"{env_id} x {num_envs} envs ({backend} backend)"
    fix = "use fewer envs (num_envs / --n-envs)"
    if num_envs > MAX_NUM_ENVS:
        raise LimitError(f"{what}: more than the kit's limit of {MAX_NUM_ENVS} envs per vector env; {fix}")
    if processes:
        check_processes(what, processes, fix)
        # frames cross through one segment (at most an observation per env), beside multiprocessing's own
        # semaphores and heap arenas, all in /dev/shm
        check_shared_memory(what, num_envs * obs + SHM_SPARE)
    worker = WORKER_BYTES if backend == "subprocess" else SHARD_BYTES
    need = num_envs * (OBS_COPIES * obs + ENV_BYTES) + processes * worker
    check_memory(what, need, fix + " or smaller observations")


@contextlib.contextmanager
def memory_errors(what: str) -> Iterator[None]:
    """Turn a MemoryError raised inside into :class:`OutOfMemoryError` (one line, naming ``what``)."""
    try:
        yield
    except OutOfMemoryError:
        raise
    except MemoryError as exc:
        raise OutOfMemoryError(memory_error_line(exc, what)) from None


def memory_error_line(exc: BaseException, what: str = "an allocation") -> str:
    """One line for a MemoryError (numpy's ``_ArrayMemoryError`` included): what failed and the limit."""
    room = available_memory()
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
    return (
        f"{what} failed: {text}; this process may use {size_text(room.amount)} more ({room.limit}); use "
        "fewer envs, a smaller buffer_size or smaller observations"
    )
