"""DNA sequences as the metrics see them: read from FASTA, coded 0-3, tiled into windows.

Bases are coded A=0, C=1, G=2, T=3 (case-insensitive: soft-masked lower-case bases count);
every other character (N, IUPAC ambiguity codes, gaps) is -1 and is skipped by every metric
(a k-mer holding one is not counted, a base that is not A/C/G/T never matches).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from genodiff.errors import InputValueError

BASES = "ACGT"
_CODES = np.full(256, -1, dtype=np.int8)
for _code, _base in enumerate(BASES):
    _CODES[ord(_base)] = _CODES[ord(_base.lower())] = _code


def read_sequences(path: str | os.PathLike) -> list[str]:
    """Upper-cased sequences of every record of a FASTA file (``.gz`` allowed; a ``.txt``
    with one sequence per line works too); ValueError when none holds an A/C/G/T base."""
    from genodiff.sample_files import read_samples  # imports torch: only when reading

    sequences = [seq.upper() for seq in read_samples(path)]
    if not any(np.any(base_codes(seq) >= 0) for seq in sequences):
        raise InputValueError(f"{path} holds no A/C/G/T base: is it DNA?")
    return sequences


def base_codes(seq: str) -> np.ndarray:
    """int8 codes of ``seq``: 0-3 for A/C/G/T (either case), -1 for anything else."""
    return _CODES[np.frombuffer(seq.encode("ascii", errors="replace"), dtype=np.uint8)]


def reverse_complement_codes(codes: np.ndarray) -> np.ndarray:
    """Codes of the reverse complement (A<->T, C<->G; -1 stays -1)."""
    flipped = codes[::-1]
    return np.where(flipped >= 0, 3 - flipped, -1).astype(np.int8)


def tile_windows(sequences: Sequence[str], length: int, max_n_fraction: float = 0.5) -> list[str]:
    """Records longer than ``length`` cut into consecutive non-overlapping windows of
    ``length`` (a shorter tail is dropped); shorter records kept whole. Windows (or records)
    whose fraction of non-A/C/G/T characters exceeds ``max_n_fraction`` are dropped."""
    if length < 1:
        raise InputValueError(f"window length must be positive, got {length}")
    windows = []
    for seq in sequences:
        pieces = [seq] if len(seq) <= length else _tiles(seq, length)
        windows += [p for p in pieces if np.mean(base_codes(p) < 0) <= max_n_fraction]
    return windows


def _tiles(seq: str, length: int) -> list[str]:
    return [seq[start : start + length] for start in range(0, len(seq) - length + 1, length)]


def evenly_spaced(items: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` of ``items``, spread evenly over them (all when there are fewer)."""
    if limit < 1:
        raise InputValueError(f"limit must be positive, got {limit}")
    if len(items) <= limit:
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, limit).astype(int)]


def split_windows(datamodule: Any, split: str) -> list[str]:
    """The bases of every window of ``split`` ("train", "valid" or "test") of a genome data
    module (``FastaDataModule``, ``Hg38DataModule``), as training cuts them, upper-cased and
    without reverse-complement augmentation."""
    datamodule.setup("fit" if split in ("train", "valid") else "test")
    dataset = datamodule.datasets[split]
    return [dataset.genome.fetch(*dataset.window(i)).upper() for i in range(len(dataset))]
