"""Run an integration's adapter when the framework it adapts is imported, whichever comes first.

An integration declares, as an entry point of the group ``retro_atari_kit.post_import``, a module of another
framework (the entry point's name) and a function to call once that module is loaded (its value), e.g.
``stable_baselines3.common.monitor = retro_atari_kit.integrations.sb3.monitor:adapt``. ``install()`` runs at
``import retro_atari_kit``: a watched module that is already loaded gets its adapter at once; one that is not
gets it right after it is first imported (a finder on ``sys.meta_path`` wraps that module's loader). The core
names no framework and no integration: it reads the table, it does not import anything from it until the
framework itself is loaded by the user's own code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
import threading
import warnings
from types import ModuleType
from typing import Any

GROUP = "retro_atari_kit.post_import"

_lock = threading.RLock()
_pending: dict[str, list[str]] = {}  # watched module -> adapters ("module:function") not yet run
_done: set[tuple[str, str]] = set()


def _run(module_name: str, target: str) -> None:
    with _lock:
        if (module_name, target) in _done:
            return
        _done.add((module_name, target))
    module_path, _, function = target.partition(":")
    try:
        adapter = getattr(importlib.import_module(module_path), function)
        adapter(sys.modules[module_name])
    except Exception as exc:  # an adapter must never break the user's import of a framework
        warnings.warn(
            f"retro-atari-kit: could not adapt {module_name} ({type(exc).__name__}: {exc}); "
            "episode statistics through it may not be the kit's true scores",
            RuntimeWarning,
            stacklevel=2,
        )


class _AfterExec(importlib.abc.Loader):
    """A loader that runs the real loader, then the adapters of the module it loaded."""

    def __init__(self, loader: importlib.abc.Loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            targets = _pending.pop(self._name, [])
        for target in targets:
            _run(self._name, target)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, ... of the real loader
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterExec(spec.loader, fullname)
                return spec
        return None


_finder = _Finder()


def watch(module_name: str, target: str) -> None:
    """Call ``target`` (``"package.module:function"``, given the loaded module) once ``module_name`` is
    loaded (now, if it already is)."""
    with _lock:
        if module_name not in sys.modules:
            _pending.setdefault(module_name, []).append(target)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    _run(module_name, target)


def install() -> None:
    """Watch every module named by the ``retro_atari_kit.post_import`` entry points of installed packages."""
    try:
        points = importlib.metadata.entry_points(group=GROUP)
    except Exception:  # broken package metadata elsewhere must not stop the kit from importing
        return
    for point in points:
        watch(point.name, point.value)
