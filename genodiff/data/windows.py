"""Fixed-length genome windows as a torch Dataset, and the split-by-region windowing of a FASTA.

A window is ``(chrom, start, end)`` with ``end - start == max_length`` (0-based, half open).
Every item is ``{"input_ids": LongTensor[max_length]}``: N (and IUPAC ambiguity codes)
become ``[PAD]``, which the loss ignores. With ``add_eos`` the item is the first
``max_length - 1`` bases of the window followed by ``[SEP]``, so every item keeps length
``max_length`` and windows stay where they would be without EOS. Reverse-complement
augmentation flips a coin per item from an RNG seeded by ``(seed, epoch, index)``, so a run
is reproducible whatever the worker count; call ``set_epoch`` to get fresh coins each epoch.
Bases are coded, and reverse-complemented, by the run's tokenizer (``tokenizer``; by default
the DNA tokenizer).
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import torch
from torch.utils.data import Dataset

from genodiff.data.genome import Genome
from genodiff.errors import InputValueError
from genodiff.tokenizers import DNATokenizer

SPLITS = ("train", "valid", "test")
Window = tuple[str, int, int]


def check_split(split: str) -> str:
    """``split``; an InputValueError (``parameter`` split) unless it is one of ``SPLITS``."""
    if split not in SPLITS:
        raise InputValueError(
            f"split={split!r}: a run's data has the splits {', '.join(SPLITS)}",
            parameter="split",
        )
    return split


class Coverage:
    """Where a set of windows lies, to ask whether a stretch overlaps any of them: per
    chromosome, the windows' starts in ascending order (K,) and the running maximum of their
    ends in that order (K,)."""

    def __init__(self, chroms: Sequence[str], starts: np.ndarray, ends: np.ndarray) -> None:
        """``chroms``, ``starts`` and ``ends`` (N,): window i is ``[starts[i], ends[i])`` of
        ``chroms[i]``, in any order."""
        chroms = np.asarray(chroms)
        self._by_chrom: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for chrom in np.unique(chroms):
            on = chroms == chrom
            order = np.argsort(starts[on], kind="stable")
            self._by_chrom[str(chrom)] = (
                starts[on][order],
                np.maximum.accumulate(ends[on][order]),
            )

    def overlaps(self, chrom: str, start: int, end: int) -> bool:
        """Whether ``[start, end)`` of ``chrom`` shares a base with any window."""
        if chrom not in self._by_chrom:
            return False
        starts, reach = self._by_chrom[chrom]
        before = int(np.searchsorted(starts, end, side="left"))  # windows starting before end
        return before > 0 and int(reach[before - 1]) > start


class GenomeWindowDataset(Dataset, ABC):
    """Base class: items ``{"input_ids": LongTensor[max_length]}`` read from ``genome``.

    Subclasses say where item ``index`` lies through ``window(index)`` and ``__len__``;
    ``tokenizer`` codes the bases (its N and [PAD] ids, reverse complement and [SEP]).
    """

    def __init__(
        self,
        genome: Genome,
        max_length: int,
        rc_aug: bool,
        add_eos: bool,
        seed: int,
        tokenizer: DNATokenizer,
    ) -> None:
        if max_length < 2:
            raise InputValueError(f"max_length must be at least 2, got {max_length}")
        self.genome = genome
        self.max_length = max_length
        self.rc_aug = rc_aug
        self.add_eos = add_eos
        self.seed = seed
        self.epoch = 0
        self.tokenizer = tokenizer

    @abstractmethod
    def window(self, index: int) -> Window:
        """``(chrom, start, end)`` of item ``index``."""

    def item_name(self, index: int) -> str:
        """``chrom:start-end`` (0-based, half open) of item ``index``."""
        chrom, start, end = self.window(index)
        return f"{chrom}:{start}-{end}"

    def coverage(self) -> Coverage:
        """Where the windows lie; every window read through ``window`` (a subclass that holds
        its windows in arrays answers faster)."""
        windows = [self.window(i) for i in range(len(self))]
        starts = np.array([w[1] for w in windows], dtype=np.int64)
        ends = np.array([w[2] for w in windows], dtype=np.int64)
        return Coverage([w[0] for w in windows], starts, ends)

    def set_epoch(self, epoch: int) -> None:
        """Draw new reverse-complement coins for ``epoch`` (items stay deterministic)."""
        self.epoch = epoch

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} windows")
        tok = self.tokenizer
        chrom, start, end = self.window(index)
        ids = tok.encode_array(self.genome.fetch(chrom, start, end - int(self.add_eos)))
        ids[ids == tok.n_id] = tok.pad_id
        if self.rc_aug and np.random.default_rng((self.seed, self.epoch, index)).random() < 0.5:
            ids = tok.reverse_complement_ids(ids)
        if self.add_eos:
            ids = np.append(ids, tok.eos_id)
        return {"input_ids": torch.from_numpy(np.ascontiguousarray(ids))}  # [max_length]


def split_bounds(length: int, split_fractions: Sequence[float], split: str) -> tuple[int, int]:
    """``[start, end)`` of ``split``'s region in a record of ``length`` bases.

    The record is cut into consecutive regions train | valid | test whose sizes follow
    ``split_fractions`` (boundaries rounded down). The fractions are taken as the decimals
    they print as (0.29 is 29/100), so a boundary that is a whole number of bases is not
    lost to binary rounding (100 * 0.29 is 28.999999999999996 in floats).
    """
    fractions = tuple(float(f) for f in split_fractions)
    if (
        len(fractions) != 3 or min(fractions) < 0 or not abs(sum(fractions) - 1.0) <= 1e-6
    ):  # NaN too
        raise InputValueError(
            f"split_fractions must be 3 non-negative numbers (train, valid, test) summing to 1, "
            f"got {tuple(split_fractions)}"
        )
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    train, valid = (Fraction(repr(f)) for f in fractions[:2])
    cuts = [0, math.floor(length * train), math.floor(length * (train + valid)), length]
    i = SPLITS.index(split)
    return cuts[i], cuts[i + 1]


def _n_fractions(
    genome: Genome, chrom: str, starts: np.ndarray, max_length: int, tok: DNATokenizer
) -> np.ndarray:
    """Fraction of N (or IUPAC-ambiguous) bases in each window ``[s, s + max_length)``."""
    out = np.empty(len(starts))
    per_chunk = max(1, (8 << 20) // max_length)  # read about 8 Mb at a time
    for i in range(0, len(starts), per_chunk):
        chunk = starts[i : i + per_chunk]
        first, last = int(chunk[0]), int(chunk[-1]) + max_length
        ids = tok.encode_array(genome.fetch(chrom, first, last))
        n_before = np.concatenate([[0], np.cumsum(ids == tok.n_id)])  # [chunk bases + 1]
        offsets = chunk - first
        out[i : i + len(chunk)] = (n_before[offsets + max_length] - n_before[offsets]) / max_length
    return out


def fasta_split_windows(
    genome: Genome,
    split: str,
    max_length: int,
    split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
    max_n_fraction: float = 0.5,
    tokenizer: DNATokenizer | None = None,
) -> list[Window]:
    """Non-overlapping windows tiling ``split``'s region of every record, in file order.

    The tail of a region shorter than ``max_length`` is dropped (so no base is counted twice
    and regions of different splits never overlap); a window whose N fraction (bases
    ``tokenizer`` codes as N; default the DNA tokenizer) exceeds ``max_n_fraction`` is dropped.
    """
    tokenizer = tokenizer or DNATokenizer()
    if max_length < 1:
        raise InputValueError(f"max_length must be positive, got {max_length}")
    windows: list[Window] = []
    for chrom, length in genome.lengths.items():
        lo, hi = split_bounds(length, split_fractions, split)
        starts = np.arange(lo, hi - max_length + 1, max_length)
        if len(starts) == 0:
            continue
        keep = _n_fractions(genome, chrom, starts, max_length, tokenizer) <= max_n_fraction
        windows += [(chrom, int(s), int(s) + max_length) for s in starts[keep]]
    return windows


class FastaWindowDataset(GenomeWindowDataset):
    """Windows of any FASTA, split by region: see ``fasta_split_windows``. ``tokenizer``
    codes the bases (default: the DNA tokenizer)."""

    def __init__(
        self,
        fasta: str | os.PathLike,
        split: str,
        max_length: int = 1024,
        split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
        max_n_fraction: float = 0.5,
        rc_aug: bool = False,
        add_eos: bool = False,
        seed: int = 0,
        cache_dir: str | os.PathLike | None = None,
        tokenizer: DNATokenizer | None = None,
    ) -> None:
        genome = Genome(fasta, cache_dir=cache_dir)
        tokenizer = tokenizer or DNATokenizer()
        super().__init__(genome, max_length, rc_aug, add_eos, seed, tokenizer)
        windows = fasta_split_windows(
            genome, split, max_length, split_fractions, max_n_fraction, tokenizer
        )
        # Arrays rather than a list of tuples: a whole genome has millions of windows.
        self._chroms = genome.names
        chrom_index = {name: i for i, name in enumerate(self._chroms)}
        self._chrom_idx = np.array([chrom_index[w[0]] for w in windows], dtype=np.int32)
        self._starts = np.array([w[1] for w in windows], dtype=np.int64)

    def __len__(self) -> int:
        return len(self._starts)

    def window(self, index: int) -> Window:
        start = int(self._starts[index])
        return self._chroms[self._chrom_idx[index]], start, start + self.max_length

    def coverage(self) -> Coverage:
        chroms = np.asarray(self._chroms, dtype=object)[self._chrom_idx]
        return Coverage(chroms.astype(str), self._starts, self._starts + self.max_length)


class SequenceDataset(Dataset):
    """Sequences given in memory, one item each, coded as a genome window is (N as [PAD], a
    final [SEP] with ``add_eos``); items are named ``sequence_<i>``."""

    def __init__(self, sequences: Sequence[str], tokenizer: DNATokenizer, add_eos: bool) -> None:
        self.sequences = list(sequences)
        self.tokenizer = tokenizer
        self.add_eos = add_eos

    def __len__(self) -> int:
        return len(self.sequences)

    def item_name(self, index: int) -> str:
        return f"sequence_{index}"

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        tok = self.tokenizer
        ids = tok.encode_array(self.sequences[index])
        ids[ids == tok.n_id] = tok.pad_id
        if self.add_eos:
            ids = np.append(ids, tok.eos_id)
        return {"input_ids": torch.from_numpy(np.ascontiguousarray(ids))}
