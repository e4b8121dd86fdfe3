"""Domains: what the core knows about each kind of sequence (``base.Domain``); ``dna`` is
built in, plugins add more.

``domain_of(tokenizer)`` is the domain a tokenizer belongs to, ``sample_alphabet(*paths)`` the
letters of the samples in some files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from genodiff import registry
from genodiff.domains.base import Domain
from genodiff.domains.dna import DNADomain
from genodiff.errors import InputValueError
from genodiff.sample_files import format_owner

if TYPE_CHECKING:
    from genodiff.tokenizers import Tokenizer


def domain_of(tokenizer: Tokenizer) -> Domain:
    """The domain ``tokenizer.domain`` names (KeyError listing the known domains otherwise)."""
    return registry.get("domain", tokenizer.domain)()


def sample_alphabet(*paths: str | os.PathLike | None) -> str:
    """The ``alphabet`` of the samples in ``paths`` (None entries skipped): that of the domain
    whose own format the first of them in such a format is in (FASTA: DNA's); when every one
    is in a domain-neutral format (.txt, .jsonl), that of the one domain that declares an
    alphabet. ValueError when that domain declares none, or no or several domains do."""
    domains = registry.available("domain")
    owners = [owner for path in paths if path is not None and (owner := format_owner(path))]
    if owners:
        alphabet = domains[owners[0]].alphabet
        if alphabet is None:
            raise InputValueError(
                f"{owners[0]} samples are not strings of a few letters (the {owners[0]} domain "
                "declares no alphabet): the sequence metrics do not apply to them"
            )
        return alphabet
    declared = {name: d.alphabet for name, d in domains.items() if d.alphabet is not None}
    if len(declared) != 1:
        files = ", ".join(str(path) for path in paths if path is not None)
        raise InputValueError(
            f"cannot tell the letters of the samples in {files} from their format: the domains "
            f"{', '.join(sorted(declared)) or '(none)'} declare an alphabet; give the samples "
            "in their domain's own format (DNA: FASTA)"
        )
    return next(iter(declared.values()))


__all__ = ["DNADomain", "Domain", "domain_of", "sample_alphabet"]
