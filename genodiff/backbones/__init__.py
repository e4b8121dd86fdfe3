"""Backbones: ids (B, L) -> logits (B, L, V). Importing this package registers the built-ins."""

from genodiff.backbones import caduceus, mamba

__all__ = ["caduceus", "mamba"]
