"""Construct a registered data module from a run's ``data`` section."""

from __future__ import annotations

from typing import Any

import lightning as L

from genodiff import registry


def build_datamodule(data_cfg: dict[str, Any]) -> L.LightningDataModule:
    """The data module registered as ``data_cfg["name"]`` (built-in or plugin), constructed with
    the section's other keys."""
    kwargs = dict(data_cfg)
    return registry.get("data", kwargs.pop("name"))(**kwargs)
