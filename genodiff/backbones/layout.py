"""How a backbone's Hugging-Face-style checkpoint folder is recognised, read and written.

Every backbone class lists its layouts in ``checkpoint_layouts`` (built-in or plugin: the
core's ``genodiff.checkpoints`` finds them through the backbone registry and names no model
class). A folder is ``config.json`` (in the upstream project's own fields) plus weights whose
names are the upstream project's; a layout translates both ways.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn


def _same(name: str) -> str:
    return name


def _no_copy(name: str) -> str | None:
    return None


@dataclass(frozen=True)
class CheckpointLayout:
    """One family of checkpoint folders and the genodiff backbone that reads them.

    - ``matches(config_json)``: True when a folder's config.json is of this layout; the
      layouts of all registered backbones must not overlap.
    - ``read_config(config_json)``: the backbone's genodiff config (without ``name``).
    - ``write_config(model, config)``: config.json for ``model``, given its full genodiff
      config (constructor defaults filled in); None for a read-only layout.
    - ``to_genodiff`` / ``to_reference``: state-dict name as stored -> as the genodiff module
      names it, and back.
    - ``tied_copy_of``: a name (as genodiff names it) under which an upstream file may store a
      second copy of a tensor the genodiff module holds once, tied (upstream's state dict
      lists a shared parameter under each module that uses it) -> the name the module holds
      it under; None for every other name. On loading such a copy is dropped when it equals
      that tensor (``genodiff.checkpoints.weights.drop_tied_copies``).
    """

    name: str
    matches: Callable[[Mapping[str, Any]], bool]
    read_config: Callable[[Mapping[str, Any]], dict[str, Any]]
    write_config: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None
    to_genodiff: Callable[[str], str] = field(default=_same)
    to_reference: Callable[[str], str] = field(default=_same)
    tied_copy_of: Callable[[str], str | None] = field(default=_no_copy)


# genodiff's own config.json field (no upstream project has it): the number of classes of a
# class-conditional backbone (``genodiff.conditioning``), written only when there are some, so
# an unconditional model's folder is exactly the upstream layout.
CONDITIONING_FIELDS = ("num_classes",)


def conditioning_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """``{"num_classes": C}`` for a backbone config with C > 0 classes, else {}."""
    return {"num_classes": config["num_classes"]} if config.get("num_classes") else {}


def pick(config: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The entries of ``config`` named in ``fields`` (those present)."""
    return {k: config[k] for k in fields if k in config}


def constructor_defaults(fn: Callable) -> dict[str, Any]:
    """The keyword defaults of ``fn``'s signature."""
    params = inspect.signature(fn).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def layouts_of(model_cls: type[nn.Module]) -> tuple[CheckpointLayout, ...]:
    """The layouts a backbone class declares (none for a class that declares nothing)."""
    return tuple(getattr(model_cls, "checkpoint_layouts", ()))
