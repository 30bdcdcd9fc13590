"""The dependency rules of docs/architecture.md, checked on the source tree and in fresh interpreters.

- The core (``retro_atari_kit/`` except ``cli/``) never imports an integration, SB3, sb3-contrib, Ray or
  rl-zoo3 (absolute or relative imports, at any depth), and imports torch only in ``models/``; its data files
  (YAML) name no module of those either.
- An integration imports the core and its own modules only: never another integration (except the one it is
  built on: the zoo's on SB3's), never the CLI, and never the run layer's new-run / resume checks (the run
  layer calls down into an engine's ``RULES``; no engine calls back up).
- Inside the core, a module imports only from its own layer or lower ones (:data:`LAYERS`, lowest first),
  and no modules import each other, directly or round a circle (function-level imports included).
- The core names an integration module in one place only: the engines' one static table,
  ``runs.engine.ENGINE_REGISTRY``; every engine there provides the engine interface and no ``prepare``.
- ``retrokit --help``, ``list``, ``plot``, ``import-roms`` and ``bench`` load no torch, SB3 or Ray.
- Comments and docstrings carry no issue numbers and no figures of one machine (docs/ holds those).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "retro_atari_kit"
INTEGRATIONS = ROOT / "integrations"
FRAMEWORKS = ("stable_baselines3", "sb3_contrib", "ray", "rl_zoo3")


def module_name(path: Path, core: Path = CORE, integrations: Path = INTEGRATIONS) -> str:
    """The installed module name of a source file (``integrations/`` is ``retro_atari_kit.integrations``)."""
    if path.is_relative_to(integrations):
        parts = ("retro_atari_kit", "integrations", *path.relative_to(integrations).with_suffix("").parts)
    else:
        parts = ("retro_atari_kit", *path.relative_to(core).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks: imports that never run."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def imported_modules(path: Path, module: str | None = None, type_checking: bool = True) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included), as absolute names;
    with ``type_checking=False``, only the imports that run (not those under ``if TYPE_CHECKING:``).

    Relative imports (``from . import x``, ``from ..integrations import y``) are resolved against
    ``module``, the file's own module name (``module_name(path)`` by default)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_only(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                own = (module or module_name(path)).split(".")
                package = own if path.name == "__init__.py" else own[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if node.module:
                names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _top(name: str) -> str:
    return name.split(".")[0]


def core_offences(core: Path = CORE) -> list[str]:
    """Imports of a framework or an integration anywhere in the core, torch outside ``models/``."""
    offences = []
    for path in sorted(core.rglob("*.py")):
        relative = path.relative_to(core)
        if relative.parts[0] == "cli":
            continue
        for name in sorted(imported_modules(path, module_name(path, core=core))):
            if _top(name) in FRAMEWORKS or name.startswith("retro_atari_kit.integrations"):
                offences.append(f"{relative}: {name}")
            if _top(name) == "torch" and relative.parts[0] != "models":
                offences.append(f"{relative}: {name} (torch only in models/)")
    return offences


# the run layer's checks, which call down into an engine's RULES: an engine importing them would call back up
CALLS_BACK_UP = ("retro_atari_kit.runs.startup.prepare_new_run", "retro_atari_kit.runs.resume.prepare_resume")

# integration -> the integrations it is built on: rl-zoo3 trains SB3's algorithms, so its adapter uses the SB3
# adapter's class table rather than a second one
BUILT_ON = {"zoo": {"sb3"}}


def integration_offences(integrations: Path = INTEGRATIONS) -> list[str]:
    """Imports of the CLI or of another integration by an integration (other than one it is built on)."""
    offences = []
    for package in sorted(p for p in integrations.iterdir() if p.is_dir() and not p.name.startswith("_")):
        for path in sorted(package.rglob("*.py")):
            relative = path.relative_to(integrations.parent)
            for name in sorted(imported_modules(path, module_name(path, integrations=integrations))):
                if name.startswith("retro_atari_kit.cli") or name in CALLS_BACK_UP:
                    offences.append(f"{relative}: {name}")
                if name.startswith("retro_atari_kit.integrations."):
                    other = name.split(".")[2]
                    if other != package.name and other not in BUILT_ON.get(package.name, set()):
                        offences.append(f"{relative}: {name}")
    return offences


# The core's layers, lowest first (docs/architecture.md, "Layers inside the core"): a module may import from
# its own layer or a lower one, never a higher one. A unit is a top-level module or subpackage of the core;
# the package root (``from retro_atari_kit import __version__``) is imported before any of its modules
# anyway and belongs to no layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "files", "csv_cells", "limits", "_early_interrupt", "adapters"),  # only each other
    ("catalog", "processes", "models", "presets", "wrappers"),
    ("roms",),
    ("envs",),
    ("vector",),
    ("registration", "recorders", "protocols"),
    ("runs",),
    ("evaluation", "recording"),
    ("cli",),
)


def _units(core: Path) -> set[str]:
    return {p.stem for p in core.glob("*.py") if p.name != "__init__.py"} | {
        p.name for p in core.iterdir() if (p / "__init__.py").is_file()
    }


def layer_offences(core: Path = CORE, layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """Imports (function-level ones included) of a higher layer of the core, and units in no layer."""
    rank = {unit: level for level, layer in enumerate(layers) for unit in layer}
    units = _units(core)
    offences = [f"{unit}: in no layer of LAYERS" for unit in sorted(units - set(rank))]
    for path in sorted(core.rglob("*.py")):
        relative = path.relative_to(core)
        own = relative.parts[0].removesuffix(".py")
        if own not in rank:
            continue  # the package root, or a unit already named above
        for name in sorted(imported_modules(path, module_name(path, core=core))):
            parts = name.split(".")
            if parts[0] != "retro_atari_kit" or len(parts) < 2 or parts[1] not in units:
                continue  # another package, the root's names, or an integration (core_offences)
            if rank.get(parts[1], -1) > rank[own]:
                offences.append(f"{relative}: {name} ({parts[1]} is a higher layer than {own})")
    return offences


def import_cycles(core: Path = CORE) -> list[str]:
    """Modules of the core that import each other, directly or round a longer circle (imports that run,
    function-level ones included): one line per group of such modules (a strongly connected component)."""
    paths = {module_name(p, core=core): p for p in sorted(core.rglob("*.py"))}

    def resolve(name: str) -> str | None:  # "pkg.mod.attr" -> "pkg.mod", the longest prefix that is a module
        parts = name.split(".")
        return next((m for i in range(len(parts), 0, -1) if (m := ".".join(parts[:i])) in paths), None)

    graph = {
        m: sorted(
            {r for n in imported_modules(p, m, type_checking=False) if (r := resolve(n)) not in (None, m)}
        )
        for m, p in paths.items()
    }
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[str] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(group) > 1:
                groups.append(", ".join(sorted(group)))

    for module in graph:
        if module not in index:
            visit(module)
    return sorted(groups)


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every string constant of a Python file that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


ENGINE_TABLE = Path("runs") / "engine.py"


def engine_name_offences(core: Path = CORE) -> list[str]:
    """Code of the core (not comments or docstrings) naming an integration module outside the engine table."""
    return [
        f"{path.relative_to(core)}:{line}: {value!r}"
        for path in sorted(core.rglob("*.py"))
        if path.relative_to(core) != ENGINE_TABLE
        for line, value in _code_strings(path)
        if "retro_atari_kit.integrations" in value
    ]


# a module path of a framework or an integration in text: "ray.rllib", "stable_baselines3.common.X"
_FRAMEWORK_PATH = re.compile(
    r"(?<![\w.])(?:(?:" + "|".join(FRAMEWORKS) + r")\.[A-Za-z_]|retro_atari_kit\.integrations\b)"
)


def _scalars(data: object) -> list[str]:
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in (*_scalars(k), *_scalars(v))]
    if isinstance(data, list):
        return [s for item in data for s in _scalars(item)]
    return [data] if isinstance(data, str) else []


def yaml_offences(core: Path = CORE) -> list[str]:
    """The core's data files naming a framework or integration module: a dotted path anywhere in the text
    (comments too), or a key / value that is a framework's package name."""
    offences = []
    for path in sorted([*core.rglob("*.yaml"), *core.rglob("*.yml")]):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(core)
        for number, line in enumerate(text.splitlines(), 1):
            offences += [f"{relative}:{number}: {m.group(0)}..." for m in _FRAMEWORK_PATH.finditer(line)]
        offences += [f"{relative}: {s!r}" for s in _scalars(yaml.safe_load(text)) if s in FRAMEWORKS]
    return offences


def test_the_scan_sees_function_level_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from stable_baselines3 import PPO\n    import ray.tune\n")
    assert {"stable_baselines3", "ray.tune"} <= imported_modules(probe, "probe")


def test_the_scan_resolves_relative_imports(tmp_path):
    package = tmp_path / "retro_atari_kit" / "runs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import layout\nfrom .files import atomic_write_text\n")
    (package / "probe.py").write_text(
        "def f():\n    from ..integrations import sb3\n    from .. import models\n"
    )
    core = tmp_path / "retro_atari_kit"
    assert imported_modules(package / "__init__.py", module_name(package / "__init__.py", core=core)) == {
        "retro_atari_kit.runs.layout",
        "retro_atari_kit.runs.files",
        "retro_atari_kit.runs.files.atomic_write_text",
    }
    assert imported_modules(package / "probe.py", module_name(package / "probe.py", core=core)) == {
        "retro_atari_kit.integrations",
        "retro_atari_kit.integrations.sb3",
        "retro_atari_kit.models",
    }


def test_each_check_catches_its_violation(tmp_path):
    """The checks below, run on a small tree that breaks each rule once, report exactly those breaks."""
    core, integrations = tmp_path / "retro_atari_kit", tmp_path / "integrations"
    for folder in (core / "runs", core / "presets", integrations / "sb3", integrations / "rllib"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (core / "runs" / "bad.py").write_text("def f():\n    from ..integrations.sb3 import buffers\n")
    (core / "runs" / "good.py").write_text("from . import bad\nfrom ..presets import x\n")
    (integrations / "sb3" / "bad.py").write_text("from ..rllib import config\nfrom ...cli import main\n")
    (integrations / "sb3" / "good.py").write_text("from . import bad\nfrom .bad import y\n")
    (integrations / "rllib" / "training.py").write_text(
        "from retro_atari_kit.runs.engine import EngineRules\n"
        "def prepare(spec):\n    from retro_atari_kit.runs.startup import prepare_new_run\n"
    )
    (core / "presets" / "ppo.yaml").write_text(
        "# SB3's PPO; the kit's classes by name\npolicy: kit-cnn\n"
        "buffer: retro_atari_kit.integrations.sb3.buffers.CompactReplayBuffer\n"
        "optimizer: stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike  # ray.rllib too\n"
        "engine: ray\n"
    )
    assert core_offences(core) == [
        "runs/bad.py: retro_atari_kit.integrations.sb3",
        "runs/bad.py: retro_atari_kit.integrations.sb3.buffers",
    ]
    assert integration_offences(integrations) == [
        "integrations/rllib/training.py: retro_atari_kit.runs.startup.prepare_new_run",
        "integrations/sb3/bad.py: retro_atari_kit.cli",
        "integrations/sb3/bad.py: retro_atari_kit.cli.main",
        "integrations/sb3/bad.py: retro_atari_kit.integrations.rllib",
        "integrations/sb3/bad.py: retro_atari_kit.integrations.rllib.config",
    ]
    assert yaml_offences(core) == [
        "presets/ppo.yaml:3: retro_atari_kit.integrations...",
        "presets/ppo.yaml:4: stable_baselines3.c...",
        "presets/ppo.yaml:4: ray.r...",
        "presets/ppo.yaml: 'ray'",
    ]


def test_the_layer_check_catches_an_upward_import_and_a_unit_in_no_layer(tmp_path):
    """On a small core: an upward import at module level and one inside a function are reported, as is a unit
    no layer names; imports of the same or a lower layer, and of the package root's names, are not."""
    core = tmp_path / "retro_atari_kit"
    for folder in (core / "runs", core / "envs", core / "cli"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (core / "__init__.py").write_text("__version__ = '0'\nfrom . import envs\n")
    (core / "errors.py").write_text("from retro_atari_kit.runs import layout\n")  # the bottom, importing up
    (core / "files.py").write_text("from . import errors\nfrom retro_atari_kit import __version__\n")
    (core / "envs" / "retro.py").write_text("from ..errors import E\ndef f():\n    from ..cli import main\n")
    (core / "runs" / "layout.py").write_text("from ..envs import retro\nfrom . import other\n")
    (core / "extra.py").write_text("")
    layers = (("errors", "files"), ("envs",), ("runs",), ("cli",))
    assert layer_offences(core, layers) == [
        "extra: in no layer of LAYERS",
        "envs/retro.py: retro_atari_kit.cli (cli is a higher layer than envs)",
        "envs/retro.py: retro_atari_kit.cli.main (cli is a higher layer than envs)",
        "errors.py: retro_atari_kit.runs (runs is a higher layer than errors)",
        "errors.py: retro_atari_kit.runs.layout (runs is a higher layer than errors)",
    ]


def test_the_cycle_check_catches_modules_that_import_each_other(tmp_path):
    """Two modules importing each other (one lazily, as the retro env and its worker did) and a circle of
    three are reported; an import only for type checking is not one that runs."""
    core = tmp_path / "retro_atari_kit"
    (core / "envs").mkdir(parents=True)
    (core / "envs" / "__init__.py").write_text("")
    (core / "envs" / "retro.py").write_text("def f():\n    from .retro_worker import W\n")
    (core / "envs" / "retro_worker.py").write_text(
        "def g():\n    from retro_atari_kit.envs.retro import make\n"
    )
    (core / "a.py").write_text("from . import b\n")
    (core / "b.py").write_text("from retro_atari_kit import c\n")
    (core / "c.py").write_text("import retro_atari_kit.a\n")
    (core / "spec.py").write_text("from retro_atari_kit.table import ENGINES\n")
    (core / "table.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from retro_atari_kit.spec import Spec\n"
    )
    assert import_cycles(core) == [
        "retro_atari_kit.a, retro_atari_kit.b, retro_atari_kit.c",
        "retro_atari_kit.envs.retro, retro_atari_kit.envs.retro_worker",
    ]


def test_no_two_modules_of_the_core_import_each_other():
    cycles = import_cycles()
    assert not cycles, cycles


def test_core_modules_import_only_their_own_layer_or_lower_ones():
    offences = layer_offences()
    assert not offences, offences


def test_the_engine_name_check_catches_a_second_table(tmp_path):
    core = tmp_path / "retro_atari_kit"
    (core / "runs").mkdir(parents=True)
    (core / "runs" / "engine.py").write_text('TABLE = {"sb3": "retro_atari_kit.integrations.sb3.training"}\n')
    (core / "runs" / "other.py").write_text(
        '"""Engines live in retro_atari_kit.integrations.<name>.training."""\n'
        "import importlib\n"
        "def engine(name):  # retro_atari_kit.integrations in a comment is fine\n"
        '    return importlib.import_module(f"retro_atari_kit.integrations.{name}.training")\n'
    )
    assert engine_name_offences(core) == ["runs/other.py:4: 'retro_atari_kit.integrations.'"]


def test_engines_are_found_through_one_static_table():
    """The core names integration modules only in ``runs.engine.ENGINE_REGISTRY``; each engine there exists,
    provides the engine interface and no pass-through ``prepare`` of its own."""
    from retro_atari_kit.runs.engine import ENGINE_INTERFACE, ENGINE_REGISTRY, load_engine

    offences = engine_name_offences()
    assert not offences, offences
    for name, entry in ENGINE_REGISTRY.items():
        parts = entry.module.split(".")
        assert parts[:2] == ["retro_atari_kit", "integrations"] and (INTEGRATIONS / parts[2]).is_dir(), entry
        module = load_engine(name)
        assert [a for a in ENGINE_INTERFACE if not hasattr(module, a)] == [], name
        assert module.RULES.name == name
        assert not hasattr(module, "prepare") and not hasattr(module, "prepare_resume"), name


def test_core_imports_no_framework_and_torch_only_in_models():
    offences = core_offences()
    assert not offences, offences


def test_core_data_files_name_no_framework_module():
    offences = yaml_offences()
    assert not offences, offences


def test_integrations_import_only_the_core_and_themselves():
    offences = integration_offences()
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


# "issue 18", "issues #3", "(#12)": tracker references belong in commits, not in the code
_ISSUE = re.compile(r"\bissues?\s*#?\d+|\(#\d+\)|(?<![\w&/])#\d+\b", re.I)
# "on this 2-core VM", "this CPU": figures of one machine belong in docs/ (performance.md), with the date
_THIS_MACHINE = re.compile(r"\bthis\s+(?:\d+-core\s+)?(?:VM|machine|CPU|box|host)\b", re.I)


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file; the whole text of a YAML file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        return list(enumerate(text.splitlines(), 1))
    out = [
        (tok.start[0], tok.string.lstrip("#"))
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                first = node.body[0].lineno
                out += [(first + i, line) for i, line in enumerate(doc.splitlines())]
    return out


def note_offences(*roots: Path) -> list[str]:
    """Comments and docstrings (and YAML text) under ``roots`` that cite an issue number or one machine."""
    offences = []
    for root in roots:
        for path in sorted([*root.rglob("*.py"), *root.rglob("*.yaml"), *root.rglob("*.yml")]):
            for number, line in _comments_and_docstrings(path):
                for pattern in (_ISSUE, _THIS_MACHINE):
                    offences += [
                        f"{path.relative_to(root.parent)}:{number}: {m.group(0)!r}"
                        for m in pattern.finditer(line)
                    ]
    return offences


def test_comments_cite_no_issue_and_no_one_machine():
    offences = note_offences(CORE, INTEGRATIONS)
    assert not offences, offences


def test_the_note_check_catches_issue_numbers_and_one_machine_figures(tmp_path):
    core = tmp_path / "retro_atari_kit"
    (core / "presets").mkdir(parents=True)
    (core / "a.py").write_text(
        '"""Speed-ups (issue 18).\n\nOn this 2-core VM it is 1.4x faster."""\n\n'
        "def f():\n"
        '    """Measured on this CPU."""\n'
        '    x = "this machine has 2 CUDA GPU(s)"  # a message, not a note; see #12\n'
        "    return x  # 4 envs, not an issue\n"
    )
    (core / "presets" / "p.yaml").write_text("# from Issues #7\nn: 1  # on this machine\n")
    assert note_offences(core) == [
        "retro_atari_kit/a.py:7: '#12'",
        "retro_atari_kit/a.py:1: 'issue 18'",
        "retro_atari_kit/a.py:3: 'this 2-core VM'",
        "retro_atari_kit/a.py:6: 'this CPU'",
        "retro_atari_kit/presets/p.yaml:1: 'Issues #7'",
        "retro_atari_kit/presets/p.yaml:2: 'this machine'",
    ]


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
