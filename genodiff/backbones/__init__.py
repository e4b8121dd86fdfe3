"""Backbones: ids (B, L) -> logits (B, L, V). Importing this package registers the built-ins."""

from genodiff.backbones import caduceus, hyena, mamba, mamba_lm

__all__ = ["caduceus", "hyena", "mamba", "mamba_lm"]
