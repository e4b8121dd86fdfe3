"""Diversity within the samples, and memorisation of the training set.

- Exact-duplicate rate: the share of sequences identical to an earlier one (0 = all distinct).
- Pairwise k-mer distance: the mean over all pairs of sequences of the Jaccard distance
  1 - |A & B| / |A | B| between their sets of k-mers (k = 6 by default). Identical sequences
  are at 0; two unrelated 1-kb stretches of DNA at about 0.85 for k = 6. Mode collapse shows as
  samples closer to each other than reference windows are.
- Nearest-neighbour identity to the training set (memorisation). The identity of a sample to
  a training stretch is the fraction of the sample's letters (of its alphabet; DNA: A/C/G/T)
  equal to the letter at the same offset in an ungapped alignment against a training record,
  on either strand (an N never matches; alignment positions past a record's end are
  mismatches). The nearest neighbour is the best such alignment, found from seeds: the index
  holds the ``seed_k``-mer
  starting at every ``seed_stride``-th position of the training set (one 64-bit word each,
  k-mer and position packed, sorted: 8 / ``seed_stride`` bytes per training base, beside the
  1 byte per base of the bases themselves), and every ``seed_k``-mer of the sample is looked up
  in it. Each hit votes for a diagonal (training position minus sample position), and the
  ``candidates`` diagonals with the most votes are scored base by base. Any run of
  ``seed_stride + seed_k - 1`` matching bases (17 by default) holds a sampled seed, so the result
  is exact whenever the best alignment holds such a run and its diagonal is among the
  candidates (an exact copy's diagonal gets every vote it can): for a sample of n bases with m
  mismatches some run of matches is at least (n - m) / (m + 1) long (pigeonhole), so for
  n = 1,024 every alignment at 94.2% identity or above holds one, and for every n >= 102 every
  one at 95%. Below that, the reported identity is a lower bound, and a sample sharing no seed
  with the training set has no nearest neighbour (None). Repeats are not skipped: a seed hits every
  sampled copy of its k-mer. The work per sample is bounded instead: at most
  ``max_seed_hits`` hits per strand are expanded into votes, the rarest seeds first; a sample
  whose seeds hit more than that reports how many hits were dropped (``seed_hits_dropped``),
  and its identity is then a lower bound too. A sample at or above ``threshold`` (default
  0.95) is flagged as a copy of the training set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from genodiff.errors import InputValueError
from genodiff.metrics.kmers import kmer_indices, kmer_profiles
from genodiff.metrics.sequences import base_codes, reverse_complement_codes

DIVERSITY_K = 6
SEED_K = 12
SEED_STRIDE = 6
CANDIDATES = 32
MAX_SEED_HITS = 4_000_000  # per sample and strand
IDENTITY_THRESHOLD = 0.95
_BLOCK = 1 << 20  # sampled seeds built per block (bounds the temporaries)


def duplicate_rate(sequences: Sequence[str]) -> float:
    """The share of ``sequences`` identical to an earlier one."""
    if not sequences:
        raise ValueError("duplicate rate of no sequence")
    return 1 - len(set(sequences)) / len(sequences)


def pairwise_kmer_distance(sequences: Sequence[str], alphabet: str, k: int = DIVERSITY_K) -> float:
    """Mean Jaccard distance between the k-mer sets (of ``alphabet``) of all pairs of
    ``sequences``."""
    if len(sequences) < 2:
        raise ValueError("pairwise distance needs at least two sequences")
    present = (kmer_profiles(sequences, k, alphabet) > 0).astype(np.float32)
    shared = present @ present.T
    sizes = present.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - shared
    similarity = np.divide(shared, union, out=np.ones_like(shared), where=union > 0)
    upper = np.triu_indices(len(sequences), k=1)
    return float(1 - similarity[upper].mean())


@dataclass
class NearestNeighbour:
    """A sample's best ungapped alignment to the training records (see the module doc)."""

    sample: int
    identity: float | None  # None: no seed shared with the training set
    record: int | None  # 0-based index of the training record, in file order
    start: int | None  # 0-based offset in that record of the sample's first base (< 0: overhang)
    strand: str | None  # "+" the sample as given, "-" its reverse complement
    seed_hits_dropped: int = 0  # hits of its most repeated seeds left out (> 0: a lower bound)


class TrainingIndex:
    """Sampled ``seed_k``-mers of training records (of ``alphabet``, which must pair every
    letter for the reverse strand: ``genodiff.metrics.sequences.COMPLEMENTS``), for
    nearest-neighbour search."""

    def __init__(
        self,
        records: Sequence[str],
        alphabet: str,
        seed_k: int = SEED_K,
        seed_stride: int = SEED_STRIDE,
        max_seed_hits: int = MAX_SEED_HITS,
    ) -> None:
        if not records:
            raise InputValueError("the training set holds no record")
        if seed_stride < 1:
            raise InputValueError(f"the seed stride must be >= 1, got {seed_stride}")
        self.alphabet = alphabet
        self.seed_k = seed_k
        self.seed_stride = seed_stride
        self.max_seed_hits = max_seed_hits
        # Records joined by one -1 (never part of a valid k-mer, never a match).
        lengths = np.array([len(r) for r in records], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])
        self.ends = self.starts + lengths
        self.codes = np.full(int(self.ends[-1]) + 1, -1, dtype=np.int8)
        for start, record in zip(self.starts, records, strict=True):
            for first in range(0, len(record), _BLOCK):  # coded a block at a time
                piece = record[first : first + _BLOCK]
                self.codes[start + first : start + first + len(piece)] = base_codes(piece, alphabet)
        self.position_bits = len(self.codes).bit_length()
        if (len(alphabet) ** seed_k - 1).bit_length() + self.position_bits > 64:
            raise InputValueError(
                f"{seed_k}-mers and positions in {len(self.codes):,} bases do not fit a 64-bit seed"
            )
        self.seeds = self._sampled_seeds()  # (S,) uint64 sorted: k-mer << position_bits | position

    def _sampled_seeds(self) -> np.ndarray:
        """The packed seed of every ``seed_stride``-th position whose k-mer is all letters."""
        count = max(0, (len(self.codes) - self.seed_k) // self.seed_stride + 1)
        seeds = np.empty(count, dtype=np.uint64)
        letters = np.uint64(len(self.alphabet))
        kept = 0  # the valid seeds are packed at the front as the blocks are built
        for first in range(0, count, _BLOCK):
            positions = np.arange(first, min(first + _BLOCK, count)) * self.seed_stride
            kmers = np.zeros(len(positions), dtype=np.uint64)
            valid = np.ones(len(positions), dtype=bool)
            for j in range(self.seed_k):
                codes = self.codes[positions + j]
                valid &= codes >= 0
                kmers = kmers * letters + np.maximum(codes, 0).astype(np.uint64)
            packed = (kmers << np.uint64(self.position_bits)) | positions.astype(np.uint64)
            seeds[kept : kept + np.count_nonzero(valid)] = packed[valid]
            kept += int(np.count_nonzero(valid))
        seeds = seeds[:kept]
        seeds.sort()  # in place
        return seeds

    def nearest(self, sample: int, seq: str, candidates: int = CANDIDATES) -> NearestNeighbour:
        """The best alignment of ``seq`` (sample number ``sample``); identity None when it
        shares no seed with the training set."""
        forward = base_codes(seq, self.alphabet)
        bases = int(np.count_nonzero(forward >= 0))
        best = NearestNeighbour(sample, None, None, None, None)
        dropped = 0
        reverse = reverse_complement_codes(forward, self.alphabet)
        for strand, codes in (("+", forward), ("-", reverse)):
            diagonals, records, strand_dropped = self._diagonals(codes, candidates)
            dropped += strand_dropped
            for diagonal, record in zip(diagonals, records, strict=True):
                identity = self._matches(codes, int(diagonal), int(record)) / bases
                if best.identity is None or identity > best.identity:
                    start = int(diagonal - self.starts[record])
                    best = NearestNeighbour(sample, identity, int(record), start, strand)
        best.seed_hits_dropped = dropped
        return best

    def _diagonals(self, codes: np.ndarray, candidates: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Diagonals (training position minus sample position) of shared seeds, most voted
        first, the record each lies on, and how many hits were left out (the most repeated
        seeds' hits beyond ``max_seed_hits``)."""
        query = kmer_indices(codes, self.seed_k, len(self.alphabet))  # (n - k + 1,)
        offsets = np.flatnonzero(query >= 0)
        shift = np.uint64(self.position_bits)
        keys = query[offsets].astype(np.uint64) << shift
        lo = np.searchsorted(self.seeds, keys, side="left")
        hits = np.searchsorted(self.seeds, keys + (np.uint64(1) << shift), side="left") - lo
        rarest = np.argsort(hits, kind="stable")
        taken = np.cumsum(hits[rarest]) <= self.max_seed_hits  # a prefix: hits ascend
        dropped = int(hits[rarest[~taken]].sum())
        keep = rarest[taken]
        keep = keep[hits[keep] > 0]
        offsets, lo, hits = offsets[keep], lo[keep], hits[keep]
        # Expand every seed into its sampled training positions.
        first = np.repeat(np.cumsum(hits) - hits, hits)
        packed = self.seeds[np.repeat(lo, hits) + np.arange(hits.sum()) - first]
        mask = (np.uint64(1) << shift) - np.uint64(1)
        train = (packed & mask).astype(np.int64)
        diagonals = train - np.repeat(offsets, hits)
        values, where, counts = np.unique(diagonals, return_index=True, return_counts=True)
        best = np.argsort(-counts, kind="stable")[:candidates]
        records = np.searchsorted(self.starts, train[where[best]], side="right") - 1
        return values[best], records, dropped

    def _matches(self, codes: np.ndarray, diagonal: int, record: int) -> int:
        """Matching letters of ``codes`` laid on ``record`` from ``diagonal`` on."""
        lo = max(0, int(self.starts[record]) - diagonal)
        hi = min(len(codes), int(self.ends[record]) - diagonal)
        sample, train = codes[lo:hi], self.codes[diagonal + lo : diagonal + hi]
        return int(np.count_nonzero((sample == train) & (sample >= 0)))


def nearest_neighbours(
    samples: Sequence[str], index: TrainingIndex, candidates: int = CANDIDATES
) -> list[NearestNeighbour]:
    """The nearest training neighbour of every sample (see the module doc)."""
    return [index.nearest(i, seq, candidates) for i, seq in enumerate(samples)]


@dataclass
class Memorisation:
    """Summary of the nearest-neighbour identities of a sample set."""

    threshold: float
    flagged: int  # samples with identity >= threshold
    flagged_fraction: float
    max_identity: float | None
    median_identity: float | None  # over samples with a nearest neighbour
    without_neighbour: int  # samples sharing no seed with the training set
    capped: int  # samples whose most repeated seeds' hits were partly left out
    neighbours: list[NearestNeighbour]

    @classmethod
    def of(
        cls, neighbours: list[NearestNeighbour], threshold: float = IDENTITY_THRESHOLD
    ) -> Memorisation:
        found = np.array([n.identity for n in neighbours if n.identity is not None])
        flagged = int(np.count_nonzero(found >= threshold))
        return cls(
            threshold=threshold,
            flagged=flagged,
            flagged_fraction=flagged / len(neighbours),
            max_identity=float(found.max()) if found.size else None,
            median_identity=float(np.median(found)) if found.size else None,
            without_neighbour=len(neighbours) - found.size,
            capped=sum(n.seed_hits_dropped > 0 for n in neighbours),
            neighbours=neighbours,
        )

    def flagged_samples(self) -> list[int]:
        return [
            n.sample
            for n in self.neighbours
            if n.identity is not None and n.identity >= self.threshold
        ]

    def to_dict(self) -> dict:
        return asdict(self)
