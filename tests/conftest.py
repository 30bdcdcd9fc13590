"""Shared test setup: real emulators only, no mocks.

The end-to-end modules below (whole ``retrokit`` runs in subprocesses, Ray clusters, rl-zoo3 and CleanRL-style
training, the docs' examples, the committed weights' replays) are marked ``slow``: ``python -m pytest -m
"not slow"`` is the quick suite for the inner loop; the README's ``python -m pytest -q`` (CI) runs them all.
"""

import os
from pathlib import Path

import pytest

# gymnasium's and SB3's env checkers open a "human" window: off-screen in every test module, whatever order
# or subset of modules runs (tests that need a real display set their own driver in a subprocess)
os.environ["SDL_VIDEODRIVER"] = "dummy"
os.environ["SDL_AUDIODRIVER"] = "dummy"

import retro_atari_kit  # noqa: F401  (registers the RetroKit/ namespace)

TESTS = Path(__file__).resolve().parent
SLOW_MODULES = {
    "cli/test_cli.py",
    "cli/test_export.py",
    "cli/test_os_errors.py",
    "cli/test_run_checks.py",
    "cli/test_stop_during_eval.py",
    "cli/test_stop_signals.py",
    "cli/test_train_faults.py",
    "integrations/rllib/test_rllib_algos.py",
    "integrations/rllib/test_rllib_cluster.py",
    "integrations/rllib/test_rllib_faults.py",
    "integrations/sb3/test_parallel_play.py",
    "integrations/sb3/test_sb3_doors.py",
    "integrations/test_cleanrl_loop.py",
    "integrations/zoo/test_zoo.py",
    "integrations/zoo/test_zoo_doors.py",
    "integrations/zoo/test_zoo_enjoy.py",
    "test_benchmarks.py",
    "test_committed_results.py",
    "test_docs_examples.py",
}


def pytest_configure(config: pytest.Config) -> None:
    missing = sorted(name for name in SLOW_MODULES if not (TESTS / name).is_file())
    if missing:  # a renamed module would silently join the quick suite
        raise pytest.UsageError(f"tests/conftest.py SLOW_MODULES names missing files: {', '.join(missing)}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(TESTS).as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
