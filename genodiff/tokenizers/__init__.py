"""Tokenizers behind one contract (``base.Tokenizer``); ``dna`` is built in, plugins add more.

``build_tokenizer`` makes one from a config section, ``tokenizer_from_record`` from what a
checkpoint stores, ``load_tokenizer`` from a folder's ``tokenizer.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from genodiff import registry
from genodiff.errors import InputValueError, UserInputError
from genodiff.plain_records import read_json_object
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


def tokenizer_from_record(record: Any, source: str | Path = "the tokenizer record") -> Tokenizer:
    """Rebuild a tokenizer from ``{"name": ..., "state": ...}`` (``tokenizer_record``), read
    from ``source`` (named in the errors): an InputKeyError for a tokenizer no installed code
    provides, an InputValueError for a record it cannot be rebuilt from."""
    if not isinstance(record, Mapping) or not isinstance(record.get("name"), str):
        raise InputValueError(
            f"{source} is not a tokenizer record (an object with a name and a state); restore "
            "it, or export the model again"
        )
    cls = registry.get_recorded("tokenizer", record["name"], source)
    state = record.get("state") or {}
    try:
        return cls.from_state(dict(state))
    except UserInputError:
        raise
    except (TypeError, ValueError, KeyError) as err:  # a state its class does not read
        detail = " ".join(str(err).split())[:160] or type(err).__name__
        raise InputValueError(
            f"{source}: the {record['name']} tokenizer cannot be rebuilt from the state it "
            f"records ({detail}); restore it, or export the model again"
        ) from None


def tokenizer_from_checkpoint(
    checkpoint: Mapping[str, Any], source: str | Path = "the checkpoint"
) -> Tokenizer:
    """The tokenizer of a loaded ``genodiff train`` checkpoint dict (read from ``source``).
    Checkpoints written before tokenizers were stored hold none: they are DNA, or name theirs
    in the config."""
    if CHECKPOINT_KEY in checkpoint:
        return tokenizer_from_record(checkpoint[CHECKPOINT_KEY], f"{source} ({CHECKPOINT_KEY})")
    config = checkpoint.get("hyper_parameters", {}).get("config", {})
    return build_tokenizer(config.get("tokenizer"))


def load_tokenizer(directory: str | Path) -> Tokenizer | None:
    """The tokenizer saved in ``directory/tokenizer.json``; None when there is none. A
    tokenizer.json that is no regular file, is too large, or holds no record a tokenizer is
    rebuilt from is an InputValueError naming it (``plain_records.read_json_object``)."""
    path = Path(directory) / TOKENIZER_FILE
    if not path.exists() and not path.is_symlink():
        return None
    return tokenizer_from_record(read_json_object(path), path)


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
