"""Construct a registered data module from a run's ``data`` section."""

from __future__ import annotations

import inspect
from collections.abc import MutableMapping
from typing import Any

from genodiff import registry
from genodiff.config import ConfigError
from genodiff.data.base import DataModule


def build_datamodule(data_cfg: dict[str, Any]) -> DataModule:
    """The data module registered as ``data_cfg["name"]`` (built-in or plugin), constructed with
    the section's other keys; ConfigError for a registered class that is not a ``DataModule``
    (whose base class builds the sharded loaders every data module must use)."""
    kwargs = dict(data_cfg)
    name = kwargs.pop("name")
    cls = registry.get("data", name)
    if not (isinstance(cls, type) and issubclass(cls, DataModule)):
        raise ConfigError(
            f"data.name={name!r} is {cls!r}, not a subclass of genodiff.data.base.DataModule "
            "(which builds the loaders that every data module must use)"
        )
    return cls(**kwargs)


def record_window(data_cfg: MutableMapping[str, Any]) -> None:
    """Write into a run's ``data`` section that names no ``max_length`` the window its data
    module takes by default (the class's ``max_length`` keyword): the saved config then names
    the window the run trains on, the length ``genodiff sample`` and ``eval`` default to and the
    trained-window warning compares with (none named, they would take 1024 tokens)."""
    if "max_length" in data_cfg:
        return
    keyword = inspect.signature(registry.get("data", data_cfg["name"])).parameters.get("max_length")
    if keyword is not None and keyword.default not in (None, inspect.Parameter.empty):
        data_cfg["max_length"] = keyword.default
