"""Base composition: GC content, CpG observed/expected, homopolymer runs, low complexity.

Everything counts the letters of the samples' alphabet only (``genodiff.metrics.sequences``;
DNA: A/C/G/T, either case); N and other characters are skipped. GC content and CpG read the
letters C and G, which the alphabet must hold.

- GC content of a sequence: (G + C) / (A + C + G + T).
- CpG observed/expected (Gardiner-Garden & Frommer 1987): CpG * n / (C * G), where CpG counts
  adjacent C-then-G pairs on the given strand and n = A + C + G + T; undefined (NaN) when the
  sequence has no C or no G.
- Homopolymer fraction: the share of bases lying in a run of one base at least ``min_run`` long.
- Low-complexity fraction, DUST-style: every window of ``window`` bases (sliding by one; a
  shorter sequence is one window) is scored as in DUST (Morgulis et al. 2006),
  score = sum_t c_t (c_t - 1) / 2 / (l - 1), with c_t the count of triplet t (one of N^3 for N
  letters) among the window's l triplets; bases covered by a window scoring above
  ``level / 10`` are low-complexity (the sdust / dustmasker defaults: 64 bp, level 20, so
  score > 2; random DNA scores about 0.5, a 64-bp homopolymer 31). Unlike sdust / dustmasker,
  which mask a repeat's best-scoring sub-interval, this masks every base of a window scoring
  above the threshold, flanks included, so its fraction is a different number from theirs,
  comparable only with itself (samples against the reference): 20 A between two 66-bp de
  Bruijn stretches (no triplet twice) mask 115 bases here and 25 under sdust (pydustmasker
  3.3), 12 A none here and 17 under sdust; on the 180 N-free 1-kb windows starting every 5 kb
  of the demo's chr22 slice (data/chr22_20-21Mb.fa.gz) it masks 8.8% of the bases, sdust 6.2%.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from genodiff.metrics.kmers import kmer_indices
from genodiff.metrics.sequences import base_codes, letter_code

MIN_HOMOPOLYMER = 6
DUST_WINDOW = 64
DUST_LEVEL = 20
DUST_BLOCK = 1 << 14  # windows scored at a time (bounds the (windows, N^3) counts)


def gc_content(seq: str, alphabet: str) -> float:
    """(G + C) / (letters of ``alphabet``; DNA: A + C + G + T); NaN without any."""
    codes = base_codes(seq, alphabet)
    c, g = (letter_code(alphabet, x, "GC content") for x in "CG")
    bases = np.count_nonzero(codes >= 0)
    return np.count_nonzero((codes == c) | (codes == g)) / bases if bases else float("nan")


def cpg_observed_expected(seq: str, alphabet: str) -> float:
    """CpG * n / (C * G) (see the module doc; n: the letters of ``alphabet``); NaN without C
    or G."""
    codes = base_codes(seq, alphabet)
    c_code, g_code = (letter_code(alphabet, x, "CpG observed/expected") for x in "CG")
    c, g = np.count_nonzero(codes == c_code), np.count_nonzero(codes == g_code)
    if c == 0 or g == 0:
        return float("nan")
    cpg = np.count_nonzero((codes[:-1] == c_code) & (codes[1:] == g_code))
    return cpg * np.count_nonzero(codes >= 0) / (c * g)


def homopolymer_bases(seq: str, alphabet: str, min_run: int = MIN_HOMOPOLYMER) -> int:
    """How many letters of ``seq`` (of ``alphabet``) lie in a run of one letter at least
    ``min_run`` long."""
    codes = base_codes(seq, alphabet)
    if codes.size == 0:
        return 0
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    runs = np.diff(np.append(starts, codes.size))
    long = (runs >= min_run) & (codes[starts] >= 0)
    return int(runs[long].sum())


def dust_scores(seq: str, alphabet: str, window: int = DUST_WINDOW) -> np.ndarray:
    """DUST score of every ``window``-base window of ``seq`` (one per start position; the whole
    sequence when it is shorter). Triplets holding a character outside ``alphabet`` are not
    counted. Scored ``DUST_BLOCK`` windows at a time, so memory stays bounded on a long
    sequence."""
    triplets = kmer_indices(base_codes(seq, alphabet), 3, len(alphabet))
    if triplets.size == 0:
        return np.zeros(0)
    per_window = min(window, len(seq)) - 2  # triplets lying inside one window
    windows = triplets.size - per_window + 1
    return np.concatenate(
        [
            _dust_block(triplets[first : first + DUST_BLOCK + per_window - 1], per_window, alphabet)
            for first in range(0, windows, DUST_BLOCK)
        ]
    )


def _dust_block(triplets: np.ndarray, per_window: int, alphabet: str) -> np.ndarray:
    """DUST scores of the windows of ``per_window`` consecutive triplets lying inside
    ``triplets`` (-1: not counted), one per start."""
    one_hot = np.zeros((triplets.size + 1, len(alphabet) ** 3), dtype=np.int32)
    valid = triplets >= 0
    one_hot[1:][valid, triplets[valid]] = 1
    cumulative = np.cumsum(one_hot, axis=0)
    counts = cumulative[per_window:] - cumulative[:-per_window]  # (windows, N^3)
    pairs = (counts * (counts - 1) // 2).sum(axis=1)
    triplet_count = counts.sum(axis=1)
    return np.where(triplet_count > 1, pairs / np.maximum(triplet_count - 1, 1), 0.0)


def low_complexity_bases(
    seq: str, alphabet: str, window: int = DUST_WINDOW, level: int = DUST_LEVEL
) -> int:
    """How many letters of ``seq`` (of ``alphabet``) lie in a window whose DUST score exceeds
    level/10."""
    scores = dust_scores(seq, alphabet, window)
    span = min(window, len(seq))
    starts = np.flatnonzero(scores > level / 10)
    covered = np.zeros(len(seq) + 1, dtype=np.int64)
    np.add.at(covered, starts, 1)
    np.add.at(covered, starts + span, -1)
    masked = np.cumsum(covered[:-1]) > 0
    return int(np.count_nonzero(masked & (base_codes(seq, alphabet) >= 0)))


def pooled_fraction(
    sequences: Sequence[str], alphabet: str, count: Callable[[str, str], int]
) -> float:
    """sum over sequences of ``count(seq, alphabet)`` / their letters of ``alphabet``."""
    bases = sum(int(np.count_nonzero(base_codes(s, alphabet) >= 0)) for s in sequences)
    return sum(count(s, alphabet) for s in sequences) / bases if bases else float("nan")


@dataclass
class DistributionComparison:
    """One per-sequence statistic, samples vs reference (NaNs dropped). A side without any
    defined value (CpG o/e of sequences that all lack C or G) has None for its mean and sd,
    and so have the distances between the sides (``undefined`` names such sides)."""

    samples_mean: float | None
    samples_sd: float | None
    reference_mean: float | None
    reference_sd: float | None
    wasserstein: float | None  # earth mover's distance between the two empirical distributions
    ks_statistic: float | None  # two-sample Kolmogorov-Smirnov D (0 = same, 1 = disjoint)
    ks_pvalue: float | None

    @classmethod
    def of(cls, samples: np.ndarray, reference: np.ndarray) -> DistributionComparison:
        samples, reference = samples[~np.isnan(samples)], reference[~np.isnan(reference)]
        sides = {"samples": _mean_sd(samples), "reference": _mean_sd(reference)}
        distances = dict.fromkeys(("wasserstein", "ks_statistic", "ks_pvalue"))
        if samples.size and reference.size:
            ks = stats.ks_2samp(samples, reference)
            distances = {
                "wasserstein": float(stats.wasserstein_distance(samples, reference)),
                "ks_statistic": float(ks.statistic),
                "ks_pvalue": float(ks.pvalue),
            }
        return cls(
            samples_mean=sides["samples"][0],
            samples_sd=sides["samples"][1],
            reference_mean=sides["reference"][0],
            reference_sd=sides["reference"][1],
            **distances,
        )

    def undefined(self) -> list[str]:
        """The sides ("samples", "reference") without any defined value."""
        return [side for side in ("samples", "reference") if getattr(self, f"{side}_mean") is None]

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _mean_sd(values: np.ndarray) -> tuple[float | None, float | None]:
    """The mean and (population) sd of ``values``; None, None without any."""
    if values.size == 0:
        return None, None
    return float(values.mean()), float(values.std())
