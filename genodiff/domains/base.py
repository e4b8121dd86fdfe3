"""The domain contract: what the core needs to know about one kind of sequence besides its
vocabulary.

A tokenizer names its domain (``Tokenizer.domain``); the domain says which files hold its
sequences: the sample formats it writes (``genodiff sample``, the samples ``genodiff train``
writes at the end), how an infilling template is read, what ``genodiff eval --file FILE``
reads (its data module's ``file_dataset``), the AR runs ``genodiff gen-ppl`` scores with when
none is given, and the letters its samples are made of (``genodiff evaluate-samples``). DNA is
built in (``genodiff.domains.dna``); plugins add domains through the ``genodiff.domains``
entry-point group.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from genodiff.sample_formats import NEUTRAL_FORMATS, SampleFormat, line_template


class Domain:
    """One kind of sequence. Subclasses set ``name`` (the tokenizers' ``domain``) and change
    the defaults below where their files differ."""

    name: ClassVar[str]
    #: The formats its samples are written in (by suffix); the domain-neutral .txt and .jsonl
    #: are every domain's.
    sample_formats: ClassVar[tuple[SampleFormat, ...]] = NEUTRAL_FORMATS
    #: The file in ``output_dir`` that ``genodiff train`` writes its samples to.
    samples_file: ClassVar[str] = "samples.txt"
    #: What ``genodiff eval --file FILE`` reads, for help and messages.
    eval_file: ClassVar[str] = "a text file"
    #: AR checkpoints ``genodiff gen-ppl`` scores with when none is given (relative to the
    #: working folder; the first that exists is taken).
    default_ar_checkpoints: ClassVar[tuple[str, ...]] = ()
    #: The letters its samples are made of, in the order the sequence metrics
    #: (``genodiff.metrics``) code them; None where samples are not strings of a few letters.
    alphabet: ClassVar[str | None] = None

    def read_template(self, path: Path) -> str:
        """The text of an infilling template file (``genodiff sample --infill``), for the
        tokenizer's ``encode_template``; by default its first non-empty line."""
        return line_template(path)
