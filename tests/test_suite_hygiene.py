"""The suite fails when the install is broken, and sees the environment a user's machine has.

- No test module skips on a package the install provides (a dependency, or an extra that ``.ci/run``
  installs): ``pytest.importorskip`` / ``importlib.util.find_spec`` on one would turn a broken install into
  skips. Skips are for what a machine may lack (a GPU, root, Xvfb, a CleanRL checkout, a ROM not shipped).
- No conftest sets an ``SDL_*`` variable or a display for the whole suite, and no test module does so at
  import (it would leak into every later module of its worker): a test that opens a window asks for the
  ``sdl_dummy_driver`` fixture.
"""

from __future__ import annotations

import ast
import re
from importlib.metadata import packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def provided_distributions() -> set[str]:
    """The distributions CI's install provides: the dependencies and the extras of ``.ci/run``'s install."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    extras = re.search(r'pip install -e "\.\[([^\]]+)\]"', ci).group(1).split(",")
    names = set()
    for line in requires("retro-atari-kit") or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": extra}) for extra in extras):
            names.add(_normal(req.name))
    return names


def skipped_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``importorskip("module")`` / ``find_spec("module")`` call."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("importorskip", "find_spec")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


DISPLAY_VARIABLE = re.compile(r"SDL_\w+|DISPLAY|WAYLAND_DISPLAY")


class _SetAtImport(ast.NodeVisitor):
    """``os.environ[...] = ...`` / ``os.environ.setdefault(...)`` of a display variable outside functions."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def visit_FunctionDef(self, node: ast.AST) -> None:
        pass  # a fixture or a test sets it for itself

    visit_AsyncFunctionDef = visit_FunctionDef

    def _key(self, node: ast.AST, key: ast.AST | None) -> None:
        if isinstance(key, ast.Constant) and DISPLAY_VARIABLE.fullmatch(str(key.value)):
            self.found.append((node.lineno, key.value))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store):
            self._key(node, node.slice)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if getattr(node.func, "attr", None) == "setdefault" and node.args:
            self._key(node, node.args[0])
        self.generic_visit(node)


def environ_set_at_import(source: str) -> list[tuple[int, str]]:
    """``(line, variable)`` of every ``SDL_*``, ``DISPLAY`` or ``WAYLAND_DISPLAY`` variable set when the
    module is imported (outside any function)."""
    visitor = _SetAtImport()
    visitor.visit(ast.parse(source))
    return visitor.found


def test_no_module_skips_on_a_package_the_install_provides():
    provided = provided_distributions()
    assert {"stable-baselines3", "pygame", "ray", "rl-zoo3", "sb3-contrib", "rliable", "pandas"} <= provided
    dists = packages_distributions()
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module in skipped_imports(path.read_text(encoding="utf-8"))
        if {_normal(d) for d in dists.get(module.split(".")[0], [])} & provided
    ]
    assert wrong == [], "import these (a broken install must fail, not skip): " + ", ".join(wrong)


def test_the_check_finds_a_skip_on_a_dependency():
    # the rule fires: what the test above must catch, and what it must leave alone (CleanRL's tyro)
    source = 'import pytest\nsb3 = pytest.importorskip("stable_baselines3")\npytest.importorskip("tyro")\n'
    assert skipped_imports(source) == [(2, "stable_baselines3"), (3, "tyro")]
    assert "stable-baselines3" in provided_distributions() and "tyro" not in provided_distributions()


def test_no_display_setting_for_the_whole_suite():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in environ_set_at_import(path.read_text(encoding="utf-8"))
    ]
    assert wrong == [], "set these in the tests that need them (sdl_dummy_driver): " + ", ".join(wrong)
    source = 'import os\nos.environ["SDL_VIDEODRIVER"] = "dummy"\nos.environ.setdefault("DISPLAY", ":0")\n'
    source += 'def f():\n    os.environ["SDL_AUDIODRIVER"] = "dummy"\n'
    assert environ_set_at_import(source) == [(2, "SDL_VIDEODRIVER"), (3, "DISPLAY")]  # the rule fires
