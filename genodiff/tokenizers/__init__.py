"""Tokenizers behind one contract (``base.Tokenizer``); ``dna`` is built in, plugins add more.

``build_tokenizer`` makes one from a config section, ``tokenizer_from_record`` from what a
checkpoint stores, ``load_tokenizer`` from a folder's ``tokenizer.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from genodiff import registry
from genodiff.errors import InputKeyError
from genodiff.tokenizers.base import TOKENIZER_FILE, Tokenizer, tokenizer_record
from genodiff.tokenizers.dna import DNATokenizer

DEFAULT_TOKENIZER = {"name": "dna"}
# Where a training checkpoint (.ckpt) keeps its tokenizer record.
CHECKPOINT_KEY = "genodiff_tokenizer"


def build_tokenizer(
    config: Mapping[str, Any] | None, corpus: Callable[[], Iterable[str]] | None = None
) -> Tokenizer:
    """The tokenizer a ``tokenizer:`` config section names (None: DNA)."""
    kwargs = dict(config or DEFAULT_TOKENIZER)
    cls = registry.get("tokenizer", kwargs.pop("name", "dna"))
    return cls.from_config(kwargs, corpus)


def tokenizer_from_record(record: Mapping[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from ``{"name": ..., "state": ...}`` (``tokenizer_record``)."""
    try:
        cls = registry.get("tokenizer", record["name"])
    except KeyError as err:
        raise InputKeyError(
            f"{err.args[0]}. The checkpoint was written with a tokenizer from a plugin: install "
            "it (e.g. pip install -e plugins/genodiff-text)"
        ) from None
    return cls.from_state(dict(record.get("state") or {}))


def tokenizer_from_checkpoint(checkpoint: Mapping[str, Any]) -> Tokenizer:
    """The tokenizer of a loaded ``genodiff train`` checkpoint dict. Checkpoints written
    before tokenizers were stored hold none: they are DNA, or name theirs in the config."""
    if CHECKPOINT_KEY in checkpoint:
        return tokenizer_from_record(checkpoint[CHECKPOINT_KEY])
    config = checkpoint.get("hyper_parameters", {}).get("config", {})
    return build_tokenizer(config.get("tokenizer"))


def load_tokenizer(directory: str | Path) -> Tokenizer | None:
    """The tokenizer saved in ``directory/tokenizer.json``; None when there is none."""
    path = Path(directory) / TOKENIZER_FILE
    if not path.is_file():
        return None
    return tokenizer_from_record(json.loads(path.read_text()))


__all__ = [
    "CHECKPOINT_KEY",
    "DEFAULT_TOKENIZER",
    "DNATokenizer",
    "TOKENIZER_FILE",
    "Tokenizer",
    "build_tokenizer",
    "load_tokenizer",
    "tokenizer_from_checkpoint",
    "tokenizer_from_record",
    "tokenizer_record",
]
