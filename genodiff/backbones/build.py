"""Construct a registered backbone by name."""

from __future__ import annotations

from typing import Any

from torch import nn

from genodiff import registry
from genodiff.backbones.capabilities import capabilities_of

# The attribute under which ``build`` records the backbone's config, ``name`` included.
CONFIG_ATTR = "genodiff_config"


def build(name: str, **config: Any) -> nn.Module:
    """The backbone registered as ``name`` (built-in or plugin), constructed with ``config``.

    The model remembers ``{"name": name, **config}`` as ``model.genodiff_config``, which
    ``genodiff.checkpoints.save_pretrained`` uses to write config.json. TypeError for a
    backbone that declares no ``capabilities`` (``capabilities.Capabilities``).
    """
    model = registry.get("backbone", name)(**config)
    capabilities_of(model)  # refuses an undeclared backbone here, not at its first use
    setattr(model, CONFIG_ATTR, {"name": name, **config})
    return model
