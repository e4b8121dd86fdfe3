"""Tokenizers: Caduceus-compatible character-level DNA ids."""

from genodiff.tokenizers.dna import DNATokenizer

__all__ = ["DNATokenizer"]
