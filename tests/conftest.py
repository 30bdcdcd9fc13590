"""Shared test setup: real emulators only, no mocks.

Each end-to-end module (whole ``retrokit`` runs in subprocesses, Ray clusters, rl-zoo3 and CleanRL-style
training, the docs' examples, the committed weights' replays) marks itself ``pytestmark = pytest.mark.slow``:
``python -m pytest -m "not slow"`` is the quick suite for the inner loop; the README's ``python -m pytest -q``
(CI) runs them all. Markers are declared in pyproject's ``[tool.pytest.ini_options]`` (``--strict-markers``).

Nothing here changes what a test runs against (only where SB3 puts its default log folder, below): a test
that opens a ``"human"`` window asks for SDL's
dummy driver itself (tests/core/conftest.py's ``sdl_dummy_driver``), and a package the install must provide
(the dependencies, the extras CI installs) is imported, never ``importorskip``-ed: a broken install fails
(tests/test_suite_hygiene.py checks both).

pytest-xdist runs the suite in two workers (pyproject's ``addopts``; ``-n 0`` for one process, e.g. with
``--pdb``): a worker takes whole modules (``worker_group``), so a module's fixtures are built once, and every
test that starts Ray is in one group, so two Ray clusters never start side by side.
"""

import os
import signal

import gymnasium
import pytest

# the two xdist workers share the cores: one OpenMP thread each, and in the runs their tests start (the kit
# keeps a user's setting), rather than twice as many threads as cores spinning at torch's barriers
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"

# The worker that runs the Ray tests keeps Ray's gRPC threads; with gRPC's fork handlers on, a child forked
# to run Python before its exec (subprocess's preexec_fn: the CLI tests' file-mode drop, the sweep's rlimits)
# now and then aborts in gRPC (epoll_wait: bad file descriptor). No child of a test uses gRPC before exec.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import retro_atari_kit  # noqa: F401  (registers the RetroKit/ namespace)

# a suite started in the background (``cmd &``, ``nohup``) inherits SIGINT / SIGHUP ignored and would pass
# that on to every run the tests start, which then rightly ignore them: the signal tests need a terminal's
# defaults
for _sig in (signal.SIGINT, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT else signal.SIG_DFL)


def worker_group(nodeid: str) -> str:
    """The tests one xdist worker runs in a row: ``ray`` for every test that may start Ray, else a module."""
    return "ray" if "rllib" in nodeid.lower() else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # xdist's own ``--dist loadgroup`` does nothing under pytest 9 (it renames a node id that pytest no longer
    # reads): the same whole-group scheduling, by node id
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # groups go out in this order (``--no-loadscope-reorder``): Ray's, the longest, first, then the end-to-end
    # tests (those marked ``slow``, by their module's ``pytestmark``), so that the last groups are short ones
    # and no worker waits long for the other
    items.sort(key=lambda item: (worker_group(item.nodeid) != "ray", item.get_closest_marker("slow") is None))


@pytest.fixture(autouse=True)
def _gymnasium_left_as_found():
    """A test that imports rl_zoo3 in the test process replaces gymnasium's ``TimeLimit`` (rl_zoo3's gym
    patches) for every later test of its worker: name that test, not the one it breaks."""
    yield
    assert gymnasium.wrappers.TimeLimit.__module__.startswith("gymnasium."), (
        "this test imported rl_zoo3, which patches gymnasium's TimeLimit for the rest of the worker: "
        "run rl_zoo3 in a subprocess (python -m rl_zoo3.train ...)"
    )


@pytest.fixture(autouse=True, scope="session")
def _sb3_default_log_dir(tmp_path_factory: pytest.TempPathFactory):
    """SB3's ``learn()`` without a logger of the kit's makes an (empty) ``SB3-<date>`` folder in the system's
    temporary directory each time, unless ``SB3_LOGDIR`` names one: the suite's go into pytest's own, which
    pytest prunes, rather than a hundred a run into /tmp."""
    previous = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))
    yield
    if previous is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = previous
