"""Backbones: ids (B, L) -> logits (B, L, V). Importing this package registers the built-ins."""

from genodiff.backbones import caduceus, hyena, mamba, mamba_lm
from genodiff.backbones.build import build
from genodiff.backbones.capabilities import Capabilities, capabilities_of

__all__ = ["Capabilities", "build", "caduceus", "capabilities_of", "hyena", "mamba", "mamba_lm"]
