"""Domains: what the core knows about each kind of sequence (``base.Domain``); ``dna`` is
built in, plugins add more.

``domain_of(tokenizer)`` is the domain a tokenizer belongs to
(``genodiff.sample_files.sample_alphabet`` finds the letters of the samples in some files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from genodiff import registry
from genodiff.domains.base import Domain
from genodiff.domains.dna import DNADomain

if TYPE_CHECKING:
    from genodiff.tokenizers import Tokenizer


def domain_of(tokenizer: Tokenizer) -> Domain:
    """The domain ``tokenizer.domain`` names (KeyError listing the known domains otherwise)."""
    return registry.get("domain", tokenizer.domain)()


__all__ = ["DNADomain", "Domain", "domain_of"]
