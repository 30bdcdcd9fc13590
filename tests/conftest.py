"""Shared test setup: real emulators only, no mocks.

The end-to-end modules below (whole ``retrokit`` runs in subprocesses, Ray clusters, rl-zoo3 and CleanRL-style
training, the docs' examples, the committed weights' replays) are marked ``slow``: ``python -m pytest -m
"not slow"`` is the quick suite for the inner loop; the README's ``python -m pytest -q`` (CI) runs them all.

pytest-xdist runs the suite in two workers (pyproject's ``addopts``; ``-n 0`` for one process, e.g. with
``--pdb``): a worker takes whole modules (``worker_group``), so a module's fixtures are built once, and every
test that starts Ray is in one group, so two Ray clusters never start side by side.
"""

import os
import signal
from pathlib import Path

import gymnasium
import pytest

# gymnasium's and SB3's env checkers open a "human" window: off-screen in every test module, whatever order
# or subset of modules runs (tests that need a real display set their own driver in a subprocess)
os.environ["SDL_VIDEODRIVER"] = "dummy"
os.environ["SDL_AUDIODRIVER"] = "dummy"
# the two xdist workers share the cores: one OpenMP thread each, and in the runs their tests start (the kit
# keeps a user's setting), rather than twice as many threads as cores spinning at torch's barriers
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"

import retro_atari_kit  # noqa: F401  (registers the RetroKit/ namespace)

# a suite started in the background (``cmd &``, ``nohup``) inherits SIGINT / SIGHUP ignored and would pass
# that on to every run the tests start, which then rightly ignore them: the signal tests need a terminal's
# defaults
for _sig in (signal.SIGINT, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT else signal.SIG_DFL)

TESTS = Path(__file__).resolve().parent
SLOW_MODULES = {
    "cli/test_cli.py",
    "cli/test_eval_protocols.py",
    "cli/test_export.py",
    "cli/test_fast_learner.py",
    "cli/test_files_from_others.py",
    "cli/test_os_errors.py",
    "cli/test_run_checks.py",
    "cli/test_stop_during_eval.py",
    "cli/test_stop_signals.py",
    "cli/test_train_faults.py",
    "integrations/rllib/test_rllib_algos.py",
    "integrations/rllib/test_rllib_beside_a_cluster.py",
    "integrations/rllib/test_rllib_cluster.py",
    "integrations/rllib/test_rllib_faults.py",
    "integrations/sb3/test_parallel_play.py",
    "integrations/sb3/test_sb3_doors.py",
    "integrations/test_cleanrl_loop.py",
    "integrations/test_cleanrl_scripts.py",
    "integrations/zoo/test_zoo.py",
    "integrations/zoo/test_zoo_doors.py",
    "integrations/zoo/test_zoo_enjoy.py",
    "sweep/test_sweep_api.py",
    "sweep/test_sweep_commands.py",
    "sweep/test_sweep_limits.py",
    "sweep/test_sweep_machine.py",
    "sweep/test_sweep_models.py",
    "sweep/test_sweep_os.py",
    "sweep/test_sweep_resume.py",
    "sweep/test_sweep_rllib.py",
    "sweep/test_sweep_stop.py",
    "sweep/test_sweep_strangers.py",
    "sweep/test_sweep_train.py",
    "test_benchmarks.py",
    "test_committed_results.py",
    "test_docs_examples.py",
}


def pytest_configure(config: pytest.Config) -> None:
    missing = sorted(name for name in SLOW_MODULES if not (TESTS / name).is_file())
    if missing:  # a renamed module would silently join the quick suite
        raise pytest.UsageError(f"tests/conftest.py SLOW_MODULES names missing files: {', '.join(missing)}")


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
    for item in items:
        if item.path.relative_to(TESTS).as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    # groups go out in this order (``--no-loadscope-reorder``): Ray's, the longest, first, then the end-to-end
    # modules, so that the last groups are short ones and no worker waits long for the other
    items.sort(key=lambda item: (worker_group(item.nodeid) != "ray", "slow" not in item.keywords))


@pytest.fixture(autouse=True)
def _gymnasium_left_as_found():
    """A test that imports rl_zoo3 in the test process replaces gymnasium's ``TimeLimit`` (rl_zoo3's gym
    patches) for every later test of its worker: name that test, not the one it breaks."""
    yield
    assert gymnasium.wrappers.TimeLimit.__module__.startswith("gymnasium."), (
        "this test imported rl_zoo3, which patches gymnasium's TimeLimit for the rest of the worker: "
        "run rl_zoo3 in a subprocess and skip with importlib.util.find_spec"
    )
