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
from importlib.metadata import entry_points
from typing import TypeVar

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


def available(kind: str) -> dict[str, type]:
    """All classes of ``kind`` ("backbone", "objective", "data", "tokenizer"), built-ins and
    plugins."""
    importlib.import_module(_BUILTIN_MODULES[kind])
    registry = _REGISTRIES[kind]
    for ep in entry_points(group=ENTRY_POINT_GROUPS[kind]):
        if ep.name not in registry:
            registry[ep.name] = ep.load()
    return dict(registry)


def get(kind: str, name: str) -> type:
    """The class registered as ``name``; a clear error listing the known names otherwise."""
    classes = available(kind)
    if name not in classes:
        known = ", ".join(sorted(classes)) or "(none)"
        raise KeyError(f"unknown {kind} {name!r}; known {kind}s: {known}")
    return classes[name]
