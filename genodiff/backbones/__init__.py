"""Backbones: ids (B, L) -> logits (B, L, V). Importing this package registers the built-ins."""

from genodiff.backbones import caduceus, hyena, mamba, mamba_lm
from genodiff.backbones.build import build

__all__ = ["build", "caduceus", "hyena", "mamba", "mamba_lm"]
