"""Construct a registered data module from a run's ``data`` section."""

from __future__ import annotations

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
