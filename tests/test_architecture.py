"""The dependency rules of docs/architecture.md, checked on the source tree and in fresh interpreters.

- The core (``retro_atari_kit/`` except ``cli/``) never imports an integration, SB3, sb3-contrib, Ray or
  rl-zoo3, and imports torch only in ``models/``.
- An integration imports the core and its own modules only: never another integration, never the CLI.
- ``retrokit --help``, ``list``, ``plot``, ``import-roms`` and ``bench`` load no torch, SB3 or Ray.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "retro_atari_kit"
INTEGRATIONS = ROOT / "integrations"
FRAMEWORKS = ("stable_baselines3", "sb3_contrib", "ray", "rl_zoo3")
MAX_LINES = 400


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included), as absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_scan_sees_function_level_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from stable_baselines3 import PPO\n    import ray.tune\n")
    assert {"stable_baselines3", "ray.tune"} <= imported_modules(probe)


def test_core_imports_no_framework_and_torch_only_in_models():
    offences = []
    for path in sorted(CORE.rglob("*.py")):
        relative = path.relative_to(CORE)
        if relative.parts[0] == "cli":
            continue
        for name in imported_modules(path):
            if _top(name) in FRAMEWORKS or name.startswith("retro_atari_kit.integrations"):
                offences.append(f"{relative}: {name}")
            if _top(name) == "torch" and relative.parts[0] != "models":
                offences.append(f"{relative}: {name} (torch only in models/)")
    assert not offences, offences


def test_integrations_import_only_the_core_and_themselves():
    offences = []
    for package in sorted(p for p in INTEGRATIONS.iterdir() if p.is_dir() and not p.name.startswith("_")):
        for path in sorted(package.rglob("*.py")):
            for name in imported_modules(path):
                if name.startswith("retro_atari_kit.cli"):
                    offences.append(f"{path.relative_to(ROOT)}: {name}")
                if name.startswith("retro_atari_kit.integrations."):
                    other = name.split(".")[2]
                    if other != package.name:
                        offences.append(f"{path.relative_to(ROOT)}: {name}")
    assert not offences, offences


def test_cli_imports_frameworks_only_inside_commands():
    """Module-level imports of the CLI stay framework-free; engines load inside the command that runs."""
    offences = []
    for path in sorted((CORE / "cli").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    if _top(name) in (*FRAMEWORKS, "torch") or name.startswith(
                        "retro_atari_kit.integrations"
                    ):
                        offences.append(f"{path.relative_to(ROOT)}: {name}")
    assert not offences, offences


def test_no_source_file_is_two_concerns_long():
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for base in (CORE, INTEGRATIONS)
        for p in sorted(base.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not long, long


@pytest.fixture
def run_with_monitor(tmp_path) -> Path:
    monitor = tmp_path / "run" / "monitor"
    monitor.mkdir(parents=True)
    (monitor / "0.monitor.csv").write_text('#{"t_start": 1.0, "env_id": "x"}\nr,l,t\n-21,800,5.0\n')
    return tmp_path / "run"


@pytest.mark.parametrize("command", ["--help", "list", "plot", "import-roms", "bench"])
def test_light_commands_load_no_framework(command, run_with_monitor, tmp_path):
    argv = {
        "--help": ["--help"],
        "list": ["list", "--system", "atari2600"],
        "plot": ["plot", str(run_with_monitor), "--out", str(tmp_path / "c.png")],
        "import-roms": ["import-roms", str(tmp_path)],
        "bench": ["bench", "RetroKit/Pong-v0", "--n-envs", "2", "--steps", "10", "--backends", "inprocess"],
    }[command]
    code = (
        "import sys\n"
        "from retro_atari_kit.cli import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "loaded = sorted(m for m in ('torch', 'stable_baselines3', 'ray') if m in sys.modules)\n"
        "print('LOADED', loaded, 'CODE', code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LOADED [] CODE 0" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_every_package_is_installed():
    """pyproject lists packages explicitly: a new subpackage missing there would be absent from wheels."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(("retro_atari_kit", *p.parent.relative_to(CORE).parts)) for p in CORE.rglob("__init__.py")
    } | {
        ".".join(("retro_atari_kit", "integrations", *p.parent.relative_to(INTEGRATIONS).parts))
        for p in INTEGRATIONS.rglob("__init__.py")
    }
    assert found - listed == set()
