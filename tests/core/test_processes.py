"""The child-process host every child of the kit runs on, with real child processes (no emulator needed).

A child killed mid-request, an exception in a child, a child that never starts, one that never answers and
one that ignores being asked to stop: each ends in one clear error or a bounded stop, never a hang.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import threading
import types
from pathlib import Path

import pytest

from retro_atari_kit.processes import (
    ChildDiedError,
    ChildProcess,
    receive_all,
    serve,
    stop_all,
    worker_start_hint,
)

WHO = "test child"


@pytest.fixture
def targets(monkeypatch):
    """tests/core/process_targets.py, importable by name in the children too (they get this sys.path)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return importlib.import_module("process_targets")


@pytest.fixture
def children():
    started: list[ChildProcess] = []
    yield started
    stop_all(started)


def start(children: list, target, *args, **kwargs) -> ChildProcess:
    child = ChildProcess(target, args, who=WHO, **kwargs)
    children.append(child)
    return child


def test_a_child_killed_mid_request_raises_one_line_at_once(targets, children):
    child = start(children, serve, targets.Echo)
    assert child.receive(timeout=60)[0] == "hello"
    pid = child.pid
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(ChildDiedError) as err:
        # the child sleeps 60 s; a host that waited on the pipe alone would answer "did not answer" at 50 s
        child.request("sleep", 60, timeout=50)
    assert str(err.value) == f"test child (pid {pid}) died: killed by SIGKILL (signal 9)"
    assert err.value.pid == pid and err.value.exitcode == -signal.SIGKILL
    assert not err.value.while_starting  # it had answered
    assert not child.process.is_alive()  # reaped, no zombie left to the caller
    with pytest.raises(ChildDiedError) as again:  # stays broken, raises at once, the same error
        child.request("echo", 1)
    assert again.value is err.value


def test_a_died_error_carries_the_owners_class_and_advice(targets, children):
    class EnvDied(ChildDiedError):
        pass

    child = start(children, serve, targets.Echo, died=EnvDied, advice="the env is closed, make a new one")
    child.receive(timeout=60)
    os.kill(child.pid, signal.SIGKILL)
    with pytest.raises(EnvDied, match=r"died: killed by SIGKILL \(signal 9\); the env is closed, make a new"):
        child.request("echo", 1)


def test_an_exception_in_the_child_arrives_as_itself_and_the_child_goes_on(targets, children):
    child = start(children, serve, targets.Echo)
    child.receive(timeout=60)
    os.kill(child.pid, signal.SIGINT)  # Ctrl-C is the parent's: the child ignores it
    for kind, cls in (
        ("ValueError", ValueError),
        ("KeyError", KeyError),
        ("CustomError", targets.CustomError),
    ):
        with pytest.raises(cls) as err:
            child.request("raise", (kind, "bad action 7"))
        assert type(err.value) is cls and err.value.args == ("bad action 7",)
        note = "\n".join(getattr(err.value, "__notes__", []))
        if sys.version_info >= (3, 11):
            assert note.startswith(f"raised in test child (pid {child.pid}):") and ", in handle" in note
    with pytest.raises(RuntimeError) as err:  # cannot be rebuilt: a RuntimeError naming its type
        child.request("raise-unpicklable", "oops")
    assert err.value.args == ("TwoArgumentError: oops",)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):  # the answer cannot cross
        child.request("unpicklable-result")
    assert child.request("echo", {"a": [1, 2]}) == {"a": [1, 2]}


def test_receive_all_reads_every_answer_before_raising_so_the_pipes_stay_in_step(targets, children):
    first, second = start(children, serve, targets.Echo), start(children, serve, targets.Echo)
    receive_all([first, second], timeout=60)
    first.send("raise", ("KeyError", "no such env"))
    second.send("echo", "second's answer")
    with pytest.raises(KeyError):
        receive_all([first, second])
    first.send("echo", 1)
    second.send("echo", 2)
    assert receive_all([first, second]) == [1, 2]  # not the stale "second's answer"


def test_a_construction_error_is_the_start_answer(targets, children):
    child = start(children, serve, targets.BadKwarg)
    with pytest.raises(ValueError) as err:
        child.receive(timeout=60)
    assert str(err.value) == "frame_skip must be >= 1, got 0"
    child.process.join(30)
    assert child.process.exitcode == 0


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_a_child_that_cannot_import_its_target_gives_the_start_error(monkeypatch, children, start_method):
    # a target the child cannot import, as one defined in a script read from stdin
    ghost = types.ModuleType("retrokit_ghost_module")
    exec("def target(conn):\n    pass\n", ghost.__dict__)
    monkeypatch.setitem(sys.modules, "retrokit_ghost_module", ghost)
    child = start(children, ghost.target, context=start_method)
    with pytest.raises(ChildDiedError) as err:
        child.receive(timeout=120)
    assert str(err.value) == (
        f"test child (pid {child.pid}) died while starting: exited with code 1. "
        + worker_start_hint(start_method)
    )
    assert err.value.while_starting


def test_a_fatal_exception_is_named_as_the_cause(targets, children):
    child = start(children, targets.crash_at_once)
    with pytest.raises(ChildDiedError) as err:
        child.receive(timeout=60)
    # its own last words, so no guess about the main script
    assert (
        str(err.value)
        == f"test child (pid {child.pid}) died while starting: RuntimeError: cannot build the env"
    )
    assert err.value.exitcode == 1

    child = start(children, targets.crash_after_hello)
    assert child.receive(timeout=60) == "hello"
    with pytest.raises(ChildDiedError) as err:
        child.request("go", timeout=60)
    assert str(err.value) == f"test child (pid {child.pid}) died: RuntimeError: the emulator lost its ROM"


def test_a_silent_child_is_stopped_after_the_start_timeout(targets, children):
    child = start(children, targets.silent)
    with pytest.raises(ChildDiedError) as err:
        child.receive(timeout=1)
    assert str(err.value) == f"test child (pid {child.pid}) did not start within 1 s and was stopped"
    assert not child.process.is_alive()


def test_stop_is_bounded_even_for_a_child_that_ignores_it(targets, children):
    child = start(children, targets.stubborn, grace=0.5)
    assert child.receive(timeout=60) == "hello"
    child.stop()
    assert child.process.exitcode == -signal.SIGKILL  # close, then SIGTERM were ignored: killed
    child.stop()  # idempotent
    with pytest.raises(RuntimeError, match=r"^test child \(pid \d+\) was stopped$"):
        child.request("echo", 1)


def test_close_and_eof_end_the_child_cleanly(targets, children, tmp_path):
    closed, dropped = tmp_path / "closed", tmp_path / "dropped"
    child = start(children, serve, targets.Echo, str(closed))
    child.receive(timeout=60)
    child.stop()  # asks with "close": the handler closes, the child exits 0
    assert child.process.exitcode == 0 and closed.read_text() == "closed"

    child = start(children, serve, targets.Echo, str(dropped))
    child.receive(timeout=60)
    child.conn.close()  # the parent goes away without a word
    child.process.join(30)
    assert child.process.exitcode == 0 and dropped.read_text() == "closed"
