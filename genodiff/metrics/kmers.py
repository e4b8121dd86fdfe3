"""k-mer spectra and their Jensen-Shannon divergence.

Over an alphabet of N letters (``genodiff.metrics.sequences``), a k-mer's index is its base-N
number, first letter most significant; for DNA (A=0, C=1, G=2, T=3): AA..A = 0, AC = 1, ...,
TT..T = 4^k - 1. k-mers holding a character outside the alphabet are skipped. Counts are taken
on the given strand only (no reverse-complement merging).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from genodiff.errors import InputValueError
from genodiff.metrics.sequences import base_codes


def kmer_indices(codes: np.ndarray, k: int, letters: int) -> np.ndarray:
    """Index of the k-mer starting at every position ``0 .. len(codes) - k`` of ``codes`` (of
    an alphabet of ``letters`` letters); -1 where that k-mer holds a code below 0."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = len(codes) - k + 1
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    index = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for j in range(k):
        c = codes[j : j + n]
        valid &= c >= 0
        index = index * letters + np.maximum(c, 0)
    index[~valid] = -1
    return index


def kmer_profiles(sequences: Sequence[str], k: int, alphabet: str) -> np.ndarray:
    """Counts of every k-mer of ``alphabet`` (N letters) in each sequence: float64 array
    ``(len(sequences), N^k)``."""
    size = len(alphabet) ** k
    profiles = np.zeros((len(sequences), size))
    for row, seq in enumerate(sequences):
        index = kmer_indices(base_codes(seq, alphabet), k, len(alphabet))
        profiles[row] = np.bincount(index[index >= 0], minlength=size)
    return profiles


def kmer_spectrum(sequences: Sequence[str], k: int, alphabet: str) -> np.ndarray:
    """Frequencies of the N^k k-mers of ``alphabet`` pooled over ``sequences`` (sum 1);
    ValueError when no sequence holds a k-mer of its letters."""
    counts = kmer_profiles(sequences, k, alphabet).sum(axis=0)
    if counts.sum() == 0:
        raise InputValueError(f"no {k}-mer of {'/'.join(alphabet)} letters in the sequences")
    return counts / counts.sum()


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence of two distributions, in bits (0 = equal, 1 = disjoint):
    JS = KL(p || m) / 2 + KL(q || m) / 2 with m = (p + q) / 2. Inputs are normalised."""
    p = np.asarray(p, dtype=np.float64) / np.sum(p)
    q = np.asarray(q, dtype=np.float64) / np.sum(q)
    m = (p + q) / 2

    def kl_to_m(x: np.ndarray) -> float:
        nonzero = x > 0
        return float(np.sum(x[nonzero] * np.log2(x[nonzero] / m[nonzero])))

    return max(0.0, (kl_to_m(p) + kl_to_m(q)) / 2)


def kmer_js(
    samples: Sequence[str],
    reference: Sequence[str],
    alphabet: str,
    ks: Iterable[int] = range(1, 7),
) -> dict[int, float]:
    """k -> JS divergence (bits) between the pooled k-mer spectra (of ``alphabet``) of samples
    and reference."""
    return {
        k: js_divergence(kmer_spectrum(samples, k, alphabet), kmer_spectrum(reference, k, alphabet))
        for k in ks
    }


def heldout_split(reference: Sequence[str], size: int) -> tuple[list[str], list[str]]:
    """(``size`` reference windows spread evenly, at indices floor(i (W - 1) / (size - 1)),
    the other W - size); ``size`` is lowered to W // 2, so the held-out part is never the
    larger. ``kmer_js`` between the two parts, with ``size`` = the number of samples, is the
    baseline for the samples' values: what real DNA scores against real DNA when sampling
    alone (finite sequences) puts JS above 0, more so at larger k."""
    size = min(size, len(reference) // 2)
    if size < 1:
        raise ValueError(
            f"a held-out split needs at least 2 reference windows, got {len(reference)}"
        )
    held = set(np.linspace(0, len(reference) - 1, size).astype(int).tolist())
    return (
        [w for i, w in enumerate(reference) if i in held],
        [w for i, w in enumerate(reference) if i not in held],
    )
