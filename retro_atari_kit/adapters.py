"""Adapters of other frameworks' episode recorders: what they change, when, the guard, and the opt-out.

Around a kit env, gymnasium's ``RecordEpisodeStatistics``, SB3's ``Monitor`` / ``VecMonitor`` and rl-zoo3
would report per-life clipped returns (see :mod:`retro_atari_kit.recorders`). An :class:`Adapter` makes one
module of a framework pass the kit's true-score record on instead. Each one wraps named methods of that
module's classes: the wrapper calls the framework's own method and fixes up what it produced (around other
envs it only calls it). Adapters run through ``wrapt``'s post-import hooks the moment the framework module
is loaded, whichever of the kit and the framework is imported first. Integrations declare theirs as entry
points of the group ``retro_atari_kit.post_import`` (module name = ``"package.module:ADAPTER"``), so the core
names no framework and imports no integration until the framework itself has been loaded.

The guard: before adapting, the installed version of the framework must lie in the range the adapter was
tested with, every method it wraps must be the class's own (``"Monitor.step"``) and every instance attribute
it reads must be used by the class's code (``"Monitor().results_writer"``). Otherwise it adapts nothing in
that module and warns once (``RuntimeWarning``) naming the framework, its version and what the user loses.

Opt-out: ``RETROKIT_ADAPTERS=0`` (or ``false``, ``no``, ``off``) in the environment (read at ``import
retro_atari_kit``) adapts nothing; a value neither off nor on (``1``, ``true``, ``yes``, ``on``, empty) warns
once and leaves the adapters on; :func:`disable_adapters` restores every adapted method to the framework's own
and adapts nothing loaded later; :func:`enable_adapters` undoes that and adapts every watched module already
loaded (also the way to adapt a module again after ``importlib.reload``, which re-creates its classes as the
framework wrote them).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any

import wrapt

GROUP = "retro_atari_kit.post_import"
ENV_VAR = "RETROKIT_ADAPTERS"
OFF_VALUES = ("0", "false", "no", "off")
ON_VALUES = ("1", "true", "yes", "on", "")  # "" and unset: on
MARK = "_retrokit_adapter"  # set on every replacement: a class attribute carrying it is already adapted

# a replacement for ``getattr(cls, name)``: (class, attribute name, function given the original -> new value)
Patch = tuple[type, str, Callable[[Any], Any]]


@dataclass(frozen=True)
class Adapter:
    """How one framework module is adapted, and what its guard checks first.

    ``patches(module)`` lists the replacements (class, attribute, maker of the new value from the original).
    ``requires`` names what the replacements use: ``"Class.method"`` must exist on the class,
    ``"Class().attr"`` must be an attribute the class's own methods use (set in ``__init__``, ...).
    ``versions`` is the tested range of ``framework`` (its distribution name), lowest included, highest not.
    ``loses`` says what a user of the framework gets when the adapter does not apply.
    """

    framework: str
    versions: tuple[str, str]
    requires: tuple[str, ...]
    loses: str
    patches: Callable[[ModuleType], Iterable[Patch]]


_lock = threading.RLock()
_enabled = True
_watched: dict[str, str | Adapter] = {}  # framework module -> its adapter (or "module:ATTR" naming one)
_hooked: set[str] = set()  # modules with a wrapt hook registered (wrapt fires each hook once)
_applied: list[tuple[str, type, str, bool, Any]] = []  # (module, class, attr, was in its __dict__, original)
_warned: set[str] = set()
VERSION_LOSES = (
    "the kit adapts none of its modules, so its episode recorders around kit envs report per-life clipped "
    "scores, not the kit's true game scores ({})"
)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def check(module: ModuleType, adapter: Adapter) -> str | None:
    """Why ``adapter`` must not touch ``module`` (its version or shape is not the tested one), or None."""
    try:
        version = importlib.metadata.version(adapter.framework)
    except importlib.metadata.PackageNotFoundError:
        return f"{adapter.framework} is not installed as a distribution (its version is unknown)"
    low, high = adapter.versions
    if not (_version_tuple(low) <= _version_tuple(version) < _version_tuple(high)):
        return f"{adapter.framework} {version} is not in the tested range >={low},<{high}"
    for need in adapter.requires:
        cls_name, _, attr = need.partition(".")
        cls = getattr(module, cls_name.removesuffix("()"), None)
        if not isinstance(cls, type):
            return f"{adapter.framework} {version} has no {module.__name__}.{cls_name.removesuffix('()')}"
        # a method the adapter wraps must be the class's own (an inherited one is not what it was tested on);
        # an instance attribute must be one the class's code uses
        found = attr in _names_used_by(cls) if cls_name.endswith("()") else attr in cls.__dict__
        if not found:
            return f"{adapter.framework} {version} has no {module.__name__}.{need}"
    return None


def _names_used_by(cls: type) -> set[str]:
    """Attribute names the code of ``cls`` and its bases (not ``object``) reads or stores."""
    names: set[str] = set()
    for klass in cls.__mro__[:-1]:
        for value in vars(klass).values():
            for func in (
                getattr(value, "__func__", value),
                getattr(value, "fget", None),
            ):  # methods, properties
                if isinstance(func, FunctionType):
                    names.update(func.__code__.co_names)
    return names


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _resolve(adapter: str | Adapter) -> Adapter:
    if isinstance(adapter, Adapter):
        return adapter
    module_path, _, attr = adapter.partition(":")
    return getattr(importlib.import_module(module_path), attr)


def _adapt(module: ModuleType) -> None:
    """Adapt ``module`` (a watched framework module that has just been loaded), if enabled and it passes."""
    name = module.__name__
    with _lock:
        if not _enabled or name not in _watched:
            return
        try:
            adapter = _resolve(_watched[name])
            reason = check(module, adapter)
            if reason is not None:
                if " has no " in reason:  # this module's shape: what this adapter would have done is lost
                    key, lost = (
                        f"{adapter.framework}:{name}",
                        f"the kit adapts nothing in {name}: {adapter.loses}",
                    )
                else:  # the version: every adapter of the framework is off, one warning says so
                    key, lost = adapter.framework, VERSION_LOSES.format(adapter.loses)
                _warn_once(key, f"retro-atari-kit: {reason}: {lost} (set {ENV_VAR}=0 to silence this)")
                return
            for cls, attr, make in adapter.patches(module):
                current = getattr(cls, attr)
                if getattr(current, MARK, False) or getattr(getattr(current, "__func__", None), MARK, False):
                    continue  # already adapted
                had = attr in cls.__dict__
                original = cls.__dict__.get(attr)
                setattr(cls, attr, make(current if not had else _unbound(original)))
                _applied.append((name, cls, attr, had, original))
        except Exception as exc:  # an adapter must never break the user's import of a framework
            _warn_once(
                f"error:{name}",
                f"retro-atari-kit: could not adapt {name} ({type(exc).__name__}: {exc}); episode "
                "statistics reported through it are per-life clipped scores, not the kit's true scores",
            )


def _unbound(value: Any) -> Any:
    # staticmethod / classmethod objects of a class's __dict__: their function, as getattr would give it
    return value.__func__ if isinstance(value, staticmethod) else value


def marked(func: Any) -> Any:
    """Mark ``func`` as a kit replacement (returned by a patch's maker), so it is never wrapped twice."""
    setattr(func, MARK, True)
    return func


def watch(module_name: str, adapter: str | Adapter) -> None:
    """Adapt ``module_name`` with ``adapter`` (or ``"package.module:ATTR"`` naming one) once it is loaded,
    now if it already is."""
    with _lock:
        _watched[module_name] = adapter
        if not _enabled or module_name in _hooked:
            return
        _hooked.add(module_name)
    wrapt.register_post_import_hook(_adapt, module_name)


def adapters_wanted(value: str) -> bool:
    """Whether ``RETROKIT_ADAPTERS=value`` leaves the adapters on. A value that is neither on nor off keeps
    them on (the default) and warns once naming the accepted values: a typo must not pass for either."""
    word = value.strip().lower()
    if word in OFF_VALUES:
        return False
    if word not in ON_VALUES and f"env:{word}" not in _warned:
        _warned.add(f"env:{word}")
        # the setting lives in the environment, not on a line of code: one line, no source line under it
        warnings.warn_explicit(
            f"retro-atari-kit: {ENV_VAR}={value!r} is neither on nor off, so the adapters stay on; set "
            f"{ENV_VAR} to one of {', '.join(OFF_VALUES)} (off) or {', '.join(ON_VALUES[:-1])} (on)",
            RuntimeWarning,
            filename="<environment>",
            lineno=0,
            module=__name__,
        )
    return True


def install(builtin: dict[str, Adapter]) -> None:
    """At ``import retro_atari_kit``: watch the core's own adapters and every entry point of the group
    ``retro_atari_kit.post_import``, unless ``RETROKIT_ADAPTERS=0``."""
    global _enabled
    if not adapters_wanted(os.environ.get(ENV_VAR, "1")):
        _enabled = False
    for name, adapter in builtin.items():
        watch(name, adapter)
    try:
        points = importlib.metadata.entry_points(group=GROUP)
    except Exception:  # broken package metadata elsewhere must not stop the kit from importing
        return
    for point in points:
        watch(point.name, point.value)


def adapters_enabled() -> bool:
    """Whether the kit adapts other frameworks' recorders (see :func:`disable_adapters`)."""
    return _enabled


def disable_adapters() -> None:
    """Restore every method the kit adapted to the framework's own, and adapt nothing loaded later.

    Recorders created before keep working, now as their framework wrote them: around a kit env, they report
    per-life clipped scores from then on (gymnasium's ``RecordEpisodeStatistics`` with its default key fails
    at a game end, where the kit's ``info["episode"]`` is already there). The kit's own ``info["episode"]``
    (true scores) is unchanged.
    """
    global _enabled
    with _lock:
        _enabled = False
        while _applied:
            _, cls, attr, had, original = _applied.pop()
            if had:
                setattr(cls, attr, original)
            else:
                delattr(cls, attr)


def enable_adapters() -> None:
    """Adapt again: every watched module already loaded now (also one reloaded since), others once loaded."""
    global _enabled
    with _lock:
        _enabled = True
        names = list(_watched)
    for name in names:
        module = sys.modules.get(name)
        if module is not None:
            _adapt(module)
        with _lock:
            hooked = name in _hooked
            _hooked.add(name)
        if not hooked:
            wrapt.register_post_import_hook(_adapt, name)


def adapted() -> list[str]:
    """``"module.Class.attr"`` of every method the kit has adapted and not restored."""
    with _lock:
        return [f"{name}.{cls.__name__}.{attr}" for name, cls, attr, _, _ in _applied]


class _EditingProxy:
    """Stands in for an object during one call: ``method``'s results pass through ``edit``."""

    __slots__ = ("_retrokit_target", "_retrokit_method", "_retrokit_edit")

    def __init__(self, target: Any, method: str, edit: Callable[[Any], Any]):
        self._retrokit_target = target
        self._retrokit_method = method
        self._retrokit_edit = edit

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._retrokit_target, name)
        if name != self._retrokit_method:
            return value
        edit = self._retrokit_edit
        return lambda *args, **kwargs: edit(value(*args, **kwargs))


@contextmanager
def proxied(owner: Any, attr: str, method: str, edit: Callable[[Any], Any]) -> Iterator[None]:
    """While inside: ``owner.<attr>.<method>(...)`` returns ``edit(its result)``.

    How an adapter delegates to a recorder's own method and still sees what the env below returned (the kit's
    record) before the recorder overwrites it or refuses it. ``owner.<attr>`` is restored afterwards, also
    when the call raises.
    """
    target = owner.__dict__[attr]
    owner.__dict__[attr] = _EditingProxy(target, method, edit)
    try:
        yield
    finally:
        owner.__dict__[attr] = target
