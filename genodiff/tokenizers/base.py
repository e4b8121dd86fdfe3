"""The tokenizer contract: everything the domain-neutral core needs to know about a vocabulary.

Objectives, samplers, ``genodiff eval``/``sample`` and the backbones' vocabulary take their ids
and sizes from a ``Tokenizer``; none of them assumes DNA. ``DNATokenizer`` is one
implementation; plugins add others through the ``genodiff.tokenizers`` entry-point group.

A tokenizer is saved with the run (``output_dir/tokenizer.json``), inside every training
checkpoint and in exported folders, as ``{"name": <registry name>, "state": to_state()}``, so
a checkpoint decodes its samples without the files it was trained from.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from genodiff.atomic_files import atomic_write
from genodiff.errors import InputValueError

TOKENIZER_FILE = "tokenizer.json"


class Tokenizer(ABC):
    """Ids, special tokens and text <-> ids for one domain.

    Subclasses set, in ``__init__`` or as class attributes:

    - ``name``: the registry name (``tokenizer.name`` in configs);
    - ``domain``: the name of its domain (``genodiff.domains``: the sample files, templates and
      files to score of this kind of sequence; ``"dna"`` is built in);
    - ``vocab_size``: the number of ids; models may pad their vocabulary above it;
    - ``mask_id``, ``pad_id``: the absorbing-diffusion [MASK] and the never-scored [PAD];
    - ``bos_id``, ``eos_id``: start / end of sequence, or None when the vocabulary has none;
    - ``sample_ids``: the ids a sampler may draw (DNA: A, C, G, T; text: all but [MASK]/[PAD]);
    - ``complement_map``: id -> the id of its reverse-complement partner, for vocabularies with
      one (DNA: A<->T, C<->G, every other id itself), else None; RC-equivariant backbones
      (Caduceus-PS) take it from here.
    """

    name: ClassVar[str]
    domain: ClassVar[str]
    #: What a length counts, in messages and sample descriptions ("bp" for DNA).
    unit: ClassVar[str] = "tokens"
    vocab_size: int
    mask_id: int
    pad_id: int
    bos_id: int | None
    eos_id: int | None
    sample_ids: tuple[int, ...]
    complement_map: Sequence[int] | None = None

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, without any special token added."""

    @abstractmethod
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of a 1-D id sequence."""

    def decode_sample(self, ids: Sequence[int]) -> str:
        """What a user reads for a generated sequence (text: special tokens dropped)."""
        return self.decode(ids, skip_special_tokens=True)

    def encode_sample(self, text: str) -> list[int]:
        """Ids of a sample as ``decode_sample`` wrote it, laid out as training sequences begin
        ([BOS] first when the vocabulary has one), so a model scores it in context."""
        return ([self.bos_id] if self.bos_id is not None else []) + self.encode(text)

    def encode_given(self, text: str) -> list[int]:
        """Ids of text a user fixes in a sample (a prefix, an infill template): ``encode``, for
        a vocabulary that represents every text. A tokenizer with an unknown token overrides
        this to refuse, naming them, the words it would turn into that token, so no word a user
        gave vanishes from a sample."""
        return self.encode(text)

    def encode_prefix(self, text: str) -> list[int]:
        """The ids a sample that starts with ``text`` begins with ([BOS] first when there is
        one, as the training sequences begin)."""
        ids = self.encode_given(text)
        if not ids:
            raise InputValueError(
                "the prefix is empty: give some text, e.g. 'The'", parameter="prefix"
            )
        return ([self.bos_id] if self.bos_id is not None else []) + ids

    def encode_template(self, text: str) -> list[int]:
        """Ids of an infilling template: positions holding ``mask_id`` are generated.

        The default reads the tokenizer's own mask token written in the text (e.g.
        ``"the [MASK] [MASK] sat"``), one generated token per marker.
        """
        ids = self.encode_prefix(text)
        if self.mask_id not in ids:
            raise InputValueError(
                "the infill template has no mask marker: write the mask token where text "
                "should be generated, one per token",
                parameter="infill",
            )
        return ids

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """A JSON-serialisable state from which ``from_state`` rebuilds this tokenizer."""
        return {}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Tokenizer:
        return cls(**state)

    @classmethod
    def from_config(
        cls, config: dict[str, Any], corpus: Callable[[], Iterable[str]] | None = None
    ) -> Tokenizer:
        """Build from the ``tokenizer:`` config section (``name`` removed). ``corpus`` yields
        the training split's texts, for tokenizers that are trained on the data."""
        return cls(**config)

    def save(self, directory: str | Path) -> Path:
        """Write ``tokenizer.json`` into ``directory`` (atomically); returns its path."""
        path = Path(directory) / TOKENIZER_FILE
        with atomic_write(path) as handle:
            handle.write(json.dumps(tokenizer_record(self)) + "\n")
        return path


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer dtype that stores every id below ``vocab_size`` (uint8
    for DNA, uint16 for a 30k-token text vocabulary)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"vocabulary of {vocab_size} ids is too large")


def tokenizer_record(tokenizer: Tokenizer) -> dict[str, Any]:
    """``{"name": ..., "state": ...}``: what a checkpoint or folder stores."""
    return {"name": tokenizer.name, "state": tokenizer.to_state()}
