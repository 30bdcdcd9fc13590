"""What envs and vector envs need, against what this process may use (retro_atari_kit.limits): cgroup trees
laid out like /sys/fs/cgroup (v1 and v2), and real limits on real child processes (RLIMIT_AS, RLIMIT_NPROC,
a small tmpfs over /dev/shm where this machine lets us mount one)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import pytest

import retro_atari_kit  # noqa: F401 - registers the IDs
from retro_atari_kit.limits import (
    MAX_FRAME_STACK,
    MAX_NUM_ENVS,
    MAX_SCREEN_SIZE,
    LimitError,
    OutOfMemoryError,
    available_memory,
    cgroup_headroom,
    check_shared_memory,
    memory_errors,
    shm_headroom,
)

ENV = "RetroKit/Pong-v0"


def _write(root, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_tightest_level_wins(tmp_path):
    """A systemd slice of 4 GiB above a job of 1.5 GiB (as Slurm and containers nest them): the job's own
    headroom is what the process has; "max" is no limit."""
    _write(tmp_path, "cgroup.controllers", "cpu memory pids\n")
    _write(tmp_path, "user.slice/memory.max", f"{4 << 30}\n")
    _write(tmp_path, "user.slice/memory.current", f"{3 << 30}\n")
    _write(tmp_path, "user.slice/job/memory.max", f"{1536 << 20}\n")
    _write(tmp_path, "user.slice/job/memory.current", f"{512 << 20}\n")
    room = cgroup_headroom("memory", str(tmp_path), "0::/user.slice/job\n")
    assert room.amount == 1 << 30 and room.limit.endswith("user.slice/job/memory.max")
    # the slice gets tighter than the job: the slice is named
    _write(tmp_path, "user.slice/memory.current", f"{(4 << 30) - (100 << 20)}\n")
    room = cgroup_headroom("memory", str(tmp_path), "0::/user.slice/job\n")
    assert room.amount == 100 << 20 and "user.slice/memory.max" in room.limit and "job" not in room.limit
    _write(tmp_path, "user.slice/memory.max", "max\n")
    _write(tmp_path, "user.slice/job/memory.max", "max\n")
    assert cgroup_headroom("memory", str(tmp_path), "0::/user.slice/job\n") is None
    _write(tmp_path, "user.slice/job/pids.max", "64\n")
    _write(tmp_path, "user.slice/job/pids.current", "60\n")
    assert cgroup_headroom("pids", str(tmp_path), "0::/user.slice/job\n").amount == 4


def test_cgroup_v1_limit_and_its_no_limit_value(tmp_path):
    _write(tmp_path, "memory/docker/abc/memory.limit_in_bytes", f"{2 << 30}\n")
    _write(tmp_path, "memory/docker/abc/memory.usage_in_bytes", f"{1 << 30}\n")
    _write(tmp_path, "memory/memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    proc = "12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n"
    room = cgroup_headroom("memory", str(tmp_path), proc)
    assert room.amount == 1 << 30 and room.limit.startswith("cgroup v1 ") and "docker/abc" in room.limit
    # inside the container's namespace the path above it is not mounted: its own root is read
    proc_inside = "4:memory:/docker/abc\n"
    for name in ("memory.limit_in_bytes", "memory.usage_in_bytes"):
        os.replace(tmp_path / "memory/docker/abc" / name, tmp_path / "memory" / name)
    shutil.rmtree(tmp_path / "memory/docker")
    assert cgroup_headroom("memory", str(tmp_path), proc_inside).amount == 1 << 30


def test_this_machine_s_memory_is_read_through_its_cgroup():
    """The real files: the figure is at most the host's MemAvailable, and a cgroup limit set here is met."""
    with open("/proc/meminfo") as fh:
        host = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    room = available_memory()
    assert 0 < room.amount <= host * 1.05  # MemAvailable moves between the two reads
    cgroup = cgroup_headroom("memory")
    if cgroup is not None:
        assert room.amount <= cgroup.amount * 1.05 + (64 << 20)
        assert os.path.isfile(cgroup.limit.split(" ", 2)[2])


@pytest.mark.parametrize(
    "kwargs, needles",
    [
        (dict(num_envs=10000), [f"limit of {MAX_NUM_ENVS} envs", "num_envs"]),
        (dict(num_envs=10000, backend="subprocess"), [f"limit of {MAX_NUM_ENVS} envs"]),
        (dict(num_envs=10000, backend="inprocess"), [f"limit of {MAX_NUM_ENVS} envs"]),
        (dict(num_envs=2, screen_size=20000), ["screen_size=20000", f"limit of {MAX_SCREEN_SIZE}"]),
        (dict(num_envs=2, frame_stack=10**6), ["frame_stack=1000000", f"limit of {MAX_FRAME_STACK}"]),
    ],
)
def test_sizes_without_bounds_are_refused_at_once(kwargs, needles):
    t0 = time.perf_counter()
    with pytest.raises(LimitError) as err:
        gym.make_vec(ENV, **kwargs)
    assert time.perf_counter() - t0 < 0.5
    assert "\n" not in str(err.value)
    for needle in needles:
        assert needle in str(err.value)


def test_a_single_env_s_observation_is_bounded_too():
    with pytest.raises(LimitError, match="screen_size=20000 is more than the kit's limit of 1024"):
        gym.make(ENV, screen_size=20000)


def _child(code: str, *, address_space: int | None = None, nproc_spare: int | None = None) -> str:
    """Run ``code`` in a fresh Python under a real limit; returns its stdout (its last line is the result)."""
    prelude = textwrap.dedent(
        f"""
        import os, resource, sys, time
        spare, room = {nproc_spare!r}, {address_space!r}
        if spare is not None:
            import psutil
            mine = sum(1 for p in psutil.process_iter(["uids"]) if p.info["uids"].real == os.getuid())
            hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
            resource.setrlimit(resource.RLIMIT_NPROC, (mine + spare, hard))
        import gymnasium as gym, retro_atari_kit
        if room is not None:
            used = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
            resource.setrlimit(resource.RLIMIT_AS, (used + room, resource.getrlimit(resource.RLIMIT_AS)[1]))
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.strip().splitlines()[-1]


def test_rlimit_as_refuses_a_vector_env_that_would_not_fit_in_it():
    """``ulimit -v`` leaves 256 MB to a process whose 64 in-process envs of 64 stacked frames need ~360 MB:
    refused before any env is made, in well under a second, naming RLIMIT_AS."""
    line = _child(
        """
        t = time.perf_counter()
        try:
            gym.make_vec("RetroKit/Pong-v0", num_envs=64, backend="inprocess", frame_stack=64)
        except ValueError as exc:
            print(f"{time.perf_counter() - t:.3f} {exc}")
        """,
        address_space=256 << 20,
    )
    seconds, message = line.split(" ", 1)
    assert float(seconds) < 0.5
    assert "64 envs (inprocess backend) needs ~" in message and "RLIMIT_AS (ulimit -v" in message


def test_a_failed_allocation_is_one_line_naming_the_limit():
    """What no estimate foresaw: numpy's _ArrayMemoryError under a real RLIMIT_AS becomes OutOfMemoryError
    (a MemoryError and a ValueError), one line naming what was being made and the limit."""
    line = _child(
        """
        import numpy as np
        from retro_atari_kit.limits import memory_errors
        try:
            with memory_errors("a replay buffer of 1000000 frames"):
                np.ones((1 << 30,), dtype=np.uint8)
        except MemoryError as exc:
            print(type(exc).__name__, isinstance(exc, ValueError), repr(str(exc)))
        """,
        address_space=256 << 20,
    )
    assert line.startswith("OutOfMemoryError True '")
    assert "a replay buffer of 1000000 frames failed: Unable to allocate 1.00 GiB" in line
    assert "RLIMIT_AS" in line and "\\n" not in line


def test_rlimit_nproc_refuses_more_workers_than_the_user_may_start():
    line = _child(
        """
        t = time.perf_counter()
        try:
            gym.make_vec("RetroKit/Pong-v0", num_envs=8, backend="subprocess")
        except ValueError as exc:
            print(f"{time.perf_counter() - t:.3f} {exc}")
        """,
        nproc_spare=3,
    )
    seconds, message = line.split(" ", 1)
    assert float(seconds) < 0.5
    # "3 more" when nothing else of this user starts or ends a process in between (other jobs may)
    expected = r"starts 8 processes but this user may start [0-7] more \(RLIMIT_NPROC \(ulimit -u"
    assert re.search(expected, message), message


def test_shared_memory_check_says_what_to_do(tmp_path):
    free = shm_headroom(str(tmp_path)).amount
    check_shared_memory("x", free // 2, str(tmp_path))
    with pytest.raises(LimitError) as err:
        check_shared_memory("RetroKit/Pong-v0 x 8 envs", free + (1 << 30), str(tmp_path))
    message = str(err.value)
    assert message.startswith("RetroKit/Pong-v0 x 8 envs needs ") and f"but {tmp_path} has " in message
    assert "--shm-size" in message


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", "/mnt"])
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="mounting a tmpfs over /dev/shm needs root and unshare")
def test_a_small_dev_shm_is_refused_before_anything_is_mapped(tmp_path):
    """A real 16 KB tmpfs over /dev/shm in a private mount namespace (Docker's default is 64 MB): the
    subprocess backend is refused in one line naming /dev/shm and --shm-size; the native backend in one
    process maps none and plays."""
    script = tmp_path / "small_shm.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, gymnasium as gym, retro_atari_kit
            if __name__ == "__main__":
                for backend in ("subprocess", "native"):
                    try:
                        env = gym.make_vec("RetroKit/Pong-v0", num_envs=4, backend=backend, shards=None)
                        env.reset(seed=0)
                        env.close()
                        print(backend, "ok")
                    except ValueError as exc:
                        print(backend, exc)
            """
        ).replace("shards=None", "**({'shards': 1} if backend == 'native' else {})")
    )
    res = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount -t tmpfs -o size=16k tmpfs /dev/shm && {sys.executable} {script}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("subprocess RetroKit/Pong-v0 x 4 envs (subprocess backend) needs ")
    assert "/dev/shm has 16.0 KB free" in lines[0] and "--shm-size" in lines[0]
    assert lines[1] == "native ok"


def test_memory_errors_passes_other_errors_through():
    with pytest.raises(KeyError), memory_errors("x"):
        raise KeyError("y")
    with pytest.raises(OutOfMemoryError, match="making x failed: out of memory"), memory_errors("making x"):
        raise MemoryError()
