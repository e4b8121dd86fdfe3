"""k-mer spectra and their Jensen-Shannon divergence.

Over an alphabet of N letters (``genodiff.metrics.sequences``), a k-mer's index is its base-N
number, first letter most significant; for DNA (A=0, C=1, G=2, T=3): AA..A = 0, AC = 1, ...,
TT..T = 4^k - 1. k-mers holding a character outside the alphabet are skipped. Counts are taken
on the given strand only (no reverse-complement merging).

Samples are judged against real DNA with ``heldout_kmer_js``: n = (number of samples) reference
windows held out at random, the samples and those real windows each compared with the same pool
of the other reference windows, over several random splits. The real windows' values are the
baseline a perfect generator reaches (finite samples alone keep JS above 0, more so at larger
k), with its spread over the splits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


@dataclass
class HeldOutComparison:
    """The samples and real windows compared with the same reference pools (``heldout_kmer_js``):
    for every split r, ``held_out[r]`` (n reference indices) is set aside and the other W - n
    windows are the pool; ``samples[k][r]`` = JS(samples, pool_r), ``real[k][r]`` =
    JS(held-out windows, pool_r), both (R,) in bits."""

    held_out: list[np.ndarray]
    samples: dict[int, np.ndarray]
    real: dict[int, np.ndarray]


def heldout_kmer_js(
    samples: Sequence[str],
    reference: Sequence[str],
    alphabet: str,
    ks: Iterable[int],
    splits: int,
    seed: int,
) -> HeldOutComparison:
    """Samples against real DNA, and real DNA against itself, like with like: each of
    ``splits`` random splits (``seed``) holds out n = len(samples) of the W reference windows
    and pools the other W - n, and both the samples and the held-out windows are compared with
    that pool. A perfect generator's samples are then n windows of real DNA scored exactly as
    the held-out ones are: its JS and the real-vs-real JS have the same distribution over
    splits, at any W > n. InputValueError when W <= n (no window left to pool)."""
    n, size = len(samples), len(reference)
    if size <= n:
        raise InputValueError(
            f"{size} reference windows for {n} samples: the k-mer comparison holds {n} real "
            f"windows out (as many as samples) and compares both with the rest, so it needs "
            f"more than {n}; give at least {2 * n} (a longer reference or a larger "
            "max_reference), or fewer samples",
            parameter=("reference", "max_reference"),
        )
    rng = np.random.default_rng(seed)
    held_out = [np.sort(rng.permutation(size)[:n]) for _ in range(splits)]
    comparison = HeldOutComparison(held_out, {}, {})
    for k in ks:
        spectrum = kmer_spectrum(samples, k, alphabet)
        profiles = kmer_profiles(reference, k, alphabet)  # (W, N^k)
        total = profiles.sum(axis=0)
        held = [profiles[rows].sum(axis=0) for rows in held_out]  # R x (N^k,)
        if any(h.sum() == 0 or h.sum() == total.sum() for h in held):
            raise InputValueError(
                f"a split of the reference windows leaves a side without any {k}-mer of "
                f"{'/'.join(alphabet)} letters (windows shorter than {k}, or mostly other "
                "characters); give a reference of longer windows"
            )
        comparison.samples[k] = np.array([js_divergence(spectrum, total - h) for h in held])
        comparison.real[k] = np.array([js_divergence(h, total - h) for h in held])
    return comparison
