"""Name -> class registries for backbones, objectives, data modules, tokenizers and domains.

Built-in classes register themselves with the decorators below when their module is imported.
Third-party packages add their own through entry-point groups (``genodiff.backbones``,
``genodiff.objectives``, ``genodiff.data``, ``genodiff.tokenizers``, ``genodiff.domains``,
``genodiff.scorers``)::

    [project.entry-points."genodiff.backbones"]
    my_transformer = "my_pkg.model:MyTransformer"

A plugin may also ship experiment configs and config groups: each entry of the group
``genodiff.configs`` names a folder (a ``str`` or ``os.PathLike``) searched after the core's
configs (``plugin_config_folders``)::

    [project.entry-points."genodiff.configs"]
    my_plugin = "my_pkg.resources:CONFIGS"   # CONFIGS = Path(__file__).parent / "configs"

The core never imports a plugin: a plugin's classes are found only through its entry points.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TypeVar

from genodiff.errors import InputImportError, InputKeyError
from genodiff.user_warnings import warn_user

T = TypeVar("T")

# The modules whose import registers the built-in classes of each kind.
_BUILTIN_MODULES = {
    "backbone": "genodiff.backbones",
    "objective": "genodiff.objectives",
    "data": "genodiff.data",
    "tokenizer": "genodiff.tokenizers",
    "domain": "genodiff.domains",
    "scorer": "genodiff.scorers",  # none built in: plugins' ``genodiff gen-ppl`` scorers
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


def register_domain(name: str) -> Callable[[type[T]], type[T]]:
    return _register("domain", name)


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


def available(kind: str, plugins: bool = True) -> dict[str, type]:
    """All classes of ``kind`` ("backbone", "objective", "data", "tokenizer", "domain",
    "scorer"): the built-ins, and with ``plugins`` every plugin's (each plugin of that kind is
    imported; without, none is)."""
    importlib.import_module(_BUILTIN_MODULES[kind])
    registry = _REGISTRIES[kind]
    if not plugins:
        return {name: cls for name, cls in registry.items() if _is_builtin(cls)}
    for entry in _entry_points(kind):
        if entry.name not in registry:
            registry[entry.name] = _load(kind, entry)
    return dict(registry)


def _is_builtin(cls: type) -> bool:
    return cls.__module__.partition(".")[0] == "genodiff"


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
        what = kind_label(kind)
        raise InputKeyError(  # a name from a plugin that is not installed is unknown too
            f"unknown {what} {name!r}; known {what}s: {known} (built-in and installed plugins'). "
            f"{plugin_hint(kind)}"
        )
    return registry[name]


def get_recorded(kind: str, name: str, source: str | Path, place: str = "") -> type:
    """``get`` for a ``name`` that the file ``source`` records (at ``place``, e.g.
    ``config.model.name``): an unknown name is an InputKeyError naming the file and saying that
    no installed code provides the class (a plugin not installed here; the file is fine)."""
    try:
        return get(kind, name)
    except KeyError as err:
        where = f" ({place})" if place else ""
        raise InputKeyError(
            f"{source} was made with the {kind_label(kind)} {name!r}{where}, which nothing "
            f"installed here provides: {err.args[0]}"
        ) from None


def kind_label(kind: str) -> str:
    """How messages name ``kind``."""
    return "data module" if kind == "data" else kind  # "known data modules", not "datas"


def plugin_hint(kind: str) -> str:
    """What to do when a name of ``kind`` comes from a plugin that is not installed."""
    return (
        f"A {kind_label(kind)} from a plugin (entry-point group {ENTRY_POINT_GROUPS[kind]}) "
        "is there only when that plugin is installed: install it (the text plugin: pip install "
        "genodiff-text; from a checkout: pip install -e plugins/genodiff-text)"
    )


CONFIGS_GROUP = "genodiff.configs"


def plugin_config_folders() -> list[Path]:
    """The config folders plugins ship (entry-point group ``genodiff.configs``), by entry name.
    A plugin whose entry fails to load or names no folder is skipped with a warning naming it,
    so that it cannot break the core's configs."""
    folders = []
    for entry in sorted(entry_points(group=CONFIGS_GROUP), key=lambda e: e.name):
        where = f"the configs plugin {entry.name!r} ({entry.value}, group {entry.group})"
        try:
            folder = entry.load()
        except Exception as err:  # a broken plugin must say which one it is
            warn_user(f"{where} failed to load: {err}; its configs are left out")
            continue
        if not isinstance(folder, str | os.PathLike) or not Path(folder).is_dir():
            warn_user(f"{where} names {str(folder)!r}, not a folder; left out")
            continue
        folders.append(Path(folder))
    return folders
