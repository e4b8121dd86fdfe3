"""Name -> class registries for backbones, objectives, data modules and tokenizers.

Built-in classes register themselves with the decorators below when their module is imported.
Third-party packages add their own through entry-point groups (``genodiff.backbones``,
``genodiff.objectives``, ``genodiff.data``, ``genodiff.tokenizers``)::

    [project.entry-points."genodiff.backbones"]
    my_transformer = "my_pkg.model:MyTransformer"

The core never imports a plugin: a plugin's classes are found only through its entry points.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from genodiff.errors import InputImportError, InputKeyError

T = TypeVar("T")

# The modules whose import registers the built-in classes of each kind.
_BUILTIN_MODULES = {
    "backbone": "genodiff.backbones",
    "objective": "genodiff.objectives",
    "data": "genodiff.data",
    "tokenizer": "genodiff.tokenizers",
}
_REGISTRIES: dict[str, dict[str, type]] = {kind: {} for kind in _BUILTIN_MODULES}
# Each kind's entry-point group is named like its built-in module.
ENTRY_POINT_GROUPS = dict(_BUILTIN_MODULES)


def _register(kind: str, name: str) -> Callable[[type[T]], type[T]]:
    def decorator(cls: type[T]) -> type[T]:
        registry = _REGISTRIES[kind]
        if name in registry and registry[name] is not cls:
            raise ValueError(f"{kind} {name!r} is already registered to {registry[name]!r}")
        registry[name] = cls
        return cls

    return decorator


def register_backbone(name: str) -> Callable[[type[T]], type[T]]:
    return _register("backbone", name)


def register_objective(name: str) -> Callable[[type[T]], type[T]]:
    return _register("objective", name)


def register_data(name: str) -> Callable[[type[T]], type[T]]:
    return _register("data", name)


def register_tokenizer(name: str) -> Callable[[type[T]], type[T]]:
    return _register("tokenizer", name)


def _load(kind: str, entry: EntryPoint) -> type:
    try:
        return entry.load()
    except Exception as err:  # a broken plugin must say which one it is
        raise InputImportError(
            f"the {kind} plugin {entry.name!r} ({entry.value}, entry-point group "
            f"{entry.group}) failed to load: {err}. Reinstall or uninstall that plugin."
        ) from err


def _entry_points(kind: str) -> list[EntryPoint]:
    return list(entry_points(group=ENTRY_POINT_GROUPS[kind]))


def available(kind: str) -> dict[str, type]:
    """All classes of ``kind`` ("backbone", "objective", "data", "tokenizer"), built-ins and
    plugins (every plugin of that kind is imported)."""
    importlib.import_module(_BUILTIN_MODULES[kind])
    registry = _REGISTRIES[kind]
    for entry in _entry_points(kind):
        if entry.name not in registry:
            registry[entry.name] = _load(kind, entry)
    return dict(registry)


def get(kind: str, name: str) -> type:
    """The class registered as ``name``; a clear error listing the known names otherwise.
    Only the plugin that provides ``name`` is imported (none for a built-in)."""
    importlib.import_module(_BUILTIN_MODULES[kind])
    registry = _REGISTRIES[kind]
    if name not in registry:
        for entry in _entry_points(kind):
            if entry.name == name:
                registry[name] = _load(kind, entry)
                break
    if name not in registry:
        names = set(registry) | {entry.name for entry in _entry_points(kind)}
        known = ", ".join(sorted(names)) or "(none)"
        raise InputKeyError(f"unknown {kind} {name!r}; known {kind}s: {known}")
    return registry[name]
