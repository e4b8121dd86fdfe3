"""Name -> class registries for backbones, objectives and data modules.

Built-in classes register themselves with the decorators below when their module is imported.
Third-party packages add backbones through the ``genodiff.backbones`` entry-point group::

    [project.entry-points."genodiff.backbones"]
    my_transformer = "my_pkg.model:MyTransformer"
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TypeVar

T = TypeVar("T")

_REGISTRIES: dict[str, dict[str, type]] = {"backbone": {}, "objective": {}, "data": {}}
# The modules whose import registers the built-in classes of each kind.
_BUILTIN_MODULES = {
    "backbone": "genodiff.backbones",
    "objective": "genodiff.objectives",
    "data": "genodiff.data",
}
ENTRY_POINT_GROUPS = {"backbone": "genodiff.backbones"}


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


def available(kind: str) -> dict[str, type]:
    """All classes of ``kind`` ("backbone", "objective", "data"), built-ins and plugins."""
    importlib.import_module(_BUILTIN_MODULES[kind])
    registry = _REGISTRIES[kind]
    group = ENTRY_POINT_GROUPS.get(kind)
    if group is not None:
        for ep in entry_points(group=group):
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
