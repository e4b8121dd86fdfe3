"""Diversity within the samples, and memorisation of the training set.

- Exact-duplicate rate: the share of sequences identical to an earlier one (0 = all distinct).
- Pairwise k-mer distance: the mean over all pairs of sequences of the Jaccard distance
  1 - |A & B| / |A | B| between their sets of k-mers (k = 6 by default). Identical sequences
  are at 0; two unrelated 1-kb stretches of DNA at about 0.85 for k = 6. Mode collapse shows as
  samples closer to each other than reference windows are.
- Nearest-neighbour identity to the training set (memorisation). The identity of a sample to
  a training stretch is the fraction of the sample's A/C/G/T bases equal to the base at the
  same offset in an ungapped alignment against a training record, on either strand (an N
  never matches; alignment positions past a record's end are mismatches). The nearest
  neighbour is the best such alignment: candidate offsets are the diagonals on which the
  sample shares exact ``seed_k``-mers with the training records (k-mers occurring more than
  ``max_seed_hits`` times in the training set, i.e. repeats, are not used as seeds), and the
  ``candidates`` diagonals with the most shared seeds are scored base by base. The
  result is exact whenever the best identity is high enough that the alignment must contain
  an exact ``seed_k``-mer: for a sample of n bases with m mismatches, some run of matches is
  at least (n - m) / (m + 1) long (pigeonhole), so for n = 1,024 and seed_k = 12 every alignment
  above 92.4% identity is found. Below that, the reported identity is a lower bound, and a
  sample sharing no seed with the training set has no nearest neighbour (None). A sample at or
  above ``threshold`` (default 0.95) is flagged as a copy of the training set.
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
MAX_SEED_HITS = 64
CANDIDATES = 8
IDENTITY_THRESHOLD = 0.95


def duplicate_rate(sequences: Sequence[str]) -> float:
    """The share of ``sequences`` identical to an earlier one."""
    if not sequences:
        raise ValueError("duplicate rate of no sequence")
    return 1 - len(set(sequences)) / len(sequences)


def pairwise_kmer_distance(sequences: Sequence[str], k: int = DIVERSITY_K) -> float:
    """Mean Jaccard distance between the k-mer sets of all pairs of ``sequences``."""
    if len(sequences) < 2:
        raise ValueError("pairwise distance needs at least two sequences")
    present = (kmer_profiles(sequences, k) > 0).astype(np.float32)
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


class TrainingIndex:
    """The ``seed_k``-mers of training records, for nearest-neighbour search."""

    def __init__(
        self, records: Sequence[str], seed_k: int = SEED_K, max_seed_hits: int = MAX_SEED_HITS
    ) -> None:
        if not records:
            raise InputValueError("the training set holds no record")
        self.seed_k = seed_k
        self.max_seed_hits = max_seed_hits
        # Records joined by one -1 (never part of a valid k-mer, never a match).
        codes = [base_codes(r) for r in records]
        lengths = np.array([len(c) for c in codes])
        self.starts = np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])
        self.ends = self.starts + lengths
        self.codes = np.concatenate([np.append(c, -1) for c in codes]).astype(np.int8)
        kmers = kmer_indices(self.codes, seed_k)
        positions = np.flatnonzero(kmers >= 0)
        order = np.argsort(kmers[positions], kind="stable")
        self.positions = positions[order]
        self.sorted_kmers = kmers[self.positions]

    def nearest(self, sample: int, seq: str, candidates: int = CANDIDATES) -> NearestNeighbour:
        """The best alignment of ``seq`` (sample number ``sample``); identity None when it
        shares no seed with the training set."""
        forward = base_codes(seq)
        bases = int(np.count_nonzero(forward >= 0))
        best = NearestNeighbour(sample, None, None, None, None)
        for strand, codes in (("+", forward), ("-", reverse_complement_codes(forward))):
            for diagonal, record in zip(*self._diagonals(codes, candidates), strict=True):
                identity = self._matches(codes, int(diagonal), int(record)) / bases
                if best.identity is None or identity > best.identity:
                    start = int(diagonal - self.starts[record])
                    best = NearestNeighbour(sample, identity, int(record), start, strand)
        return best

    def _diagonals(self, codes: np.ndarray, candidates: int) -> tuple[np.ndarray, np.ndarray]:
        """Diagonals (training position minus sample position) of shared seeds, most seeded
        first, with the record each lies on."""
        query = kmer_indices(codes, self.seed_k)
        offsets = np.flatnonzero(query >= 0)
        lo = np.searchsorted(self.sorted_kmers, query[offsets], side="left")
        hits = np.searchsorted(self.sorted_kmers, query[offsets], side="right") - lo
        keep = (hits > 0) & (hits <= self.max_seed_hits)
        offsets, lo, hits = offsets[keep], lo[keep], hits[keep]
        # Expand every seed into its training positions.
        first = np.repeat(np.cumsum(hits) - hits, hits)
        train = self.positions[np.repeat(lo, hits) + np.arange(hits.sum()) - first]
        diagonals = train - np.repeat(offsets, hits)
        values, where, counts = np.unique(diagonals, return_index=True, return_counts=True)
        best = np.argsort(-counts, kind="stable")[:candidates]
        records = np.searchsorted(self.starts, train[where[best]], side="right") - 1
        return values[best], records

    def _matches(self, codes: np.ndarray, diagonal: int, record: int) -> int:
        """Matching A/C/G/T bases of ``codes`` laid on ``record`` from ``diagonal`` on."""
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
