"""hg38 windows from the Basenji BED splits, as Caduceus builds them.

Matched reference: kuleshov-group/caduceus ``src/dataloaders/datasets/hg38_dataset.py``
(``HG38Dataset`` + ``FastaInterval``). HyenaDNA's dataset of the same name
(HazyResearch/hyena-dna, same path) reads the same files but differently: one item per BED
row, its first ``max_length`` bases (a row shorter than ``max_length`` is extended on both
sides, clipped at the chromosome ends and padded), and its tokenizer leaves lower-case bases
``[UNK]``. For each BED row of the split, in file order:

- the row is extended to ``2**20`` bp: ``end = start + 2**20`` (the BED ``end`` is ignored);
- it is tiled into ``2**20 // max_length`` windows ``[start + i*L, start + (i+1)*L)``
  (``max_length`` must divide ``2**20``, i.e. be a power of two up to ``2**20``);
- a window ending past the chromosome end is shifted back to ``[chrom_len - L, chrom_len)``
  (a window starting before 0 would be shifted to ``[0, L)``). As in the reference, every
  window of a row that overflows lands on that same last window, so duplicates are kept.

Item ``i`` is window ``i % shifts`` of row ``i // shifts``. Same N policy as the reference
(N -> ``[PAD]``, no window is dropped); lower-case (soft-masked) bases are bases in both (the
reference's ``CaduceusTokenizer._tokenize``, ``caduceus/tokenization_caduceus.py``, upper-cases
them), and no ``[BOS]`` or ``[CLS]`` is added in either. Since every row is extended to
``2**20`` bp, the 34,021 train rows alone span about 35.7 Gb of windows over a genome of
3.1 Gb: windows repeat (two rows less than ``2**20`` bp apart whose starts differ by a
multiple of ``max_length`` share windows), and a row's windows run over the bases of the rows
within ``2**20`` bp after it, whatever split those belong to, so valid and test windows can
hold bases that train windows hold too. This is the reference's data (its issue #69 asks
about these overlaps), kept so that numbers stay comparable with the papers'.

Differences, on purpose:

- ``add_eos`` keeps the item length at ``max_length`` (``max_length - 1`` bases +
  ``[SEP]``). The reference appends ``[SEP]`` to the ``max_length`` bases and its next-token
  items are ``data = seq[:-1]``, ``target = seq[1:]`` (``HG38Dataset.__getitem__``; its hg38
  configs set ``add_eos: true``): bases 2..L and ``[SEP]`` are predicted, the first base never.
  genodiff's AR objective reads ``[BOS]`` and the window instead and predicts every token of
  it (``genodiff/objectives/ar.py``), the tokens a diffusion model scores. The reference's MLM
  items drop the ``[SEP]`` (``src/dataloaders/utils/mlm.py``), as the default
  ``add_eos=False`` item has none.
- The IUPAC ambiguity codes (R, Y, ...) become ``[PAD]`` like N (``DNATokenizer``); the
  reference's tokenizer maps every character other than A/C/G/T/N to ``[UNK]``, which its
  loss scores (``ignore_index: 4``, ``[PAD]`` only: ``configs/pipeline/hg38.yaml``).
- Reverse-complement augmentation is applied only to the train split (the reference applies
  ``rc_aug`` to every split) with reproducible coins.
- A chromosome shorter than ``max_length`` is an error (the reference would produce a
  negative start).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np

from genodiff.data.genome import Genome
from genodiff.data.windows import SPLITS, Coverage, GenomeWindowDataset, Window
from genodiff.errors import InputValueError, require_regular_file
from genodiff.tokenizers import DNATokenizer

MAX_ALLOWED_LENGTH = 2**20  # every BED row is extended to this many bases


_ASCII_INTEGER = re.compile(r"[0-9]+")


class BedRow(NamedTuple):
    chrom: str
    start: int
    end: int
    split: str


def read_bed(path: str | os.PathLike) -> list[BedRow]:
    """Rows of a 4-column split BED (chrom, start, end, split in train/valid/test)."""
    path = Path(path)
    require_regular_file(path, "BED file", missing=f"BED file not found: {path}")
    try:
        text = path.read_text()
    except UnicodeDecodeError as err:
        raise InputValueError(
            f"{path} is not a text BED file (byte {err.start} is not UTF-8); give the "
            "4-column split BED (chrom, start, end, split), uncompressed"
        ) from None
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith(("#", "track", "browser")):
            continue
        fields = line.split()
        where = f"{path}, line {lineno}"
        if len(fields) != 4:
            raise InputValueError(
                f"{where}: expected 4 columns (chrom, start, end, split), got {len(fields)}"
            )
        chrom, start, end, split = fields
        integers = _ASCII_INTEGER.fullmatch(start) and _ASCII_INTEGER.fullmatch(end)
        if not integers or int(start) >= int(end):
            raise InputValueError(f"{where}: start/end must be integers with start < end")
        if split not in SPLITS:
            raise InputValueError(
                f"{where}: split must be one of {', '.join(SPLITS)}, got {split!r}"
            )
        rows.append(BedRow(chrom, int(start), int(end), split))
    if not rows:
        raise InputValueError(f"{path} holds no BED rows")
    return rows


def _check_max_length(max_length: int) -> int:
    if not 2 <= max_length <= MAX_ALLOWED_LENGTH or MAX_ALLOWED_LENGTH % max_length:
        raise InputValueError(
            f"max_length must be a power of two between 2 and 2**20 (it must divide 2**20, "
            f"the extended BED row), got {max_length}"
        )
    return MAX_ALLOWED_LENGTH // max_length


def _window(chrom: str, row_start: int, chrom_len: int, max_length: int, shift: int) -> Window:
    if chrom_len < max_length:
        raise InputValueError(f"chromosome {chrom!r} ({chrom_len} bp) is shorter than max_length")
    start = row_start + shift * max_length
    end = start + max_length
    if end > chrom_len:
        start, end = chrom_len - max_length, chrom_len
    if start < 0:
        start, end = 0, max_length
    return chrom, start, end


def hg38_windows(
    rows: Iterable[BedRow], chrom_lengths: Mapping[str, int], max_length: int
) -> list[Window]:
    """All windows of ``rows``, in dataset order (see the module docstring)."""
    shifts = _check_max_length(max_length)
    return [
        _window(row.chrom, row.start, chrom_lengths[row.chrom], max_length, shift)
        for row in rows
        for shift in range(shifts)
    ]


class Hg38Dataset(GenomeWindowDataset):
    """``split``'s windows of the BED rows; windows are computed on the fly (hg38 has ~35 M).
    ``tokenizer`` codes the bases (default: the DNA tokenizer)."""

    def __init__(
        self,
        fasta: str | os.PathLike,
        bed: str | os.PathLike,
        split: str,
        max_length: int = 1024,
        rc_aug: bool = False,
        add_eos: bool = False,
        seed: int = 0,
        cache_dir: str | os.PathLike | None = None,
        limit_windows: int | None = None,
        tokenizer: DNATokenizer | None = None,
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.shifts = _check_max_length(max_length)
        rows = [row for row in read_bed(bed) if row.split == split]
        genome = Genome(fasta, cache_dir=cache_dir)
        super().__init__(genome, max_length, rc_aug, add_eos, seed, tokenizer or DNATokenizer())
        for chrom in {row.chrom for row in rows}:
            if genome.length(chrom) < max_length:  # also raises KeyError for unknown names
                raise InputValueError(
                    f"chromosome {chrom!r} is shorter than max_length {max_length}"
                )
        self._row_chrom = [row.chrom for row in rows]
        self._row_start = np.array([row.start for row in rows], dtype=np.int64)
        total = len(rows) * self.shifts
        self._len = total if limit_windows is None else min(total, limit_windows)

    def __len__(self) -> int:
        return self._len

    def window(self, index: int) -> Window:
        row, shift = divmod(index, self.shifts)
        chrom = self._row_chrom[row]
        start = int(self._row_start[row])
        return _window(chrom, start, self.genome.lengths[chrom], self.max_length, shift)

    def coverage(self) -> Coverage:
        """Where the windows lie, a row at a time: a row's windows tile one stretch, from its
        first window's start to its last one's end (windows shifted at a chromosome's end
        overlap the one before)."""
        if self._len < len(self._row_chrom) * self.shifts:  # limit_windows cut a row
            return super().coverage()
        lengths = self.genome.lengths
        edges = [  # each row's first window, then its last
            _window(chrom, int(start), lengths[chrom], self.max_length, shift)
            for chrom, start in zip(self._row_chrom, self._row_start, strict=True)
            for shift in (0, self.shifts - 1)
        ]
        starts = np.array([w[1] for w in edges[0::2]], dtype=np.int64)
        ends = np.array([w[2] for w in edges[1::2]], dtype=np.int64)
        return Coverage(self._row_chrom, starts, ends)
