"""A discriminator two-sample test: can a classifier tell generated DNA from real DNA?

Each sequence becomes its k-mer frequencies for every k in 1..``k`` (each k's counts divided
by that k's total, so sequence length does not matter); a logistic regression on
standardised features is scored by stratified ``folds``-fold cross-validated AUROC, the
generated sequences being the positive class. The copies of one sequence (of one side) are kept
in one fold: a fold holding out a sample whose copy it trained on would score the classifier's
memory of that sample, not what tells the sets apart (real windows repeated 4 times each
scored 0.99 against real DNA that way; 0.54 distinct). 0.5 means the classifier cannot tell the two
sets apart from their k-mer content (it says nothing about longer-range structure); 1.0 means
it separates them perfectly. The fold spread is reported beside the mean.

The fits run on one BLAS thread: the problem is small (a few thousand sequences, a few hundred
features), and NumPy's and SciPy's OpenBLAS threads spin while they wait, so on a machine whose
cores are busy two threads made each fit ~10x slower than one (BENCHMARKS.md, "The sample
report's discriminator on one BLAS thread").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from genodiff.metrics.kmers import kmer_profiles

DISCRIMINATOR_K = 4
FOLDS = 5
# Below this many generated sequences the per-fold AUROCs spread widely, so their mean says
# little: 8 real training windows of the demo genome against its 97 test windows score
# 0.11-0.87 over the five folds, 40 windows 0.44-0.79.
MIN_SAMPLES_FOR_AUROC = 30


def kmer_features(sequences: Sequence[str], alphabet: str, k: int = DISCRIMINATOR_K) -> np.ndarray:
    """Per sequence, the k-mer frequencies (of ``alphabet``, N letters) for k = 1..``k`` side
    by side: (n, sum N^j)."""
    blocks = []
    for j in range(1, k + 1):
        counts = kmer_profiles(sequences, j, alphabet)
        totals = counts.sum(axis=1, keepdims=True)
        blocks.append(np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0))
    return np.concatenate(blocks, axis=1)


def folds_keeping_copies_together(
    sequences: Sequence[str], labels: np.ndarray, folds: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) indices of stratified ``folds``-fold cross-validation (shuffled by
    ``seed``) over the distinct (label, sequence) pairs, each pair's copies in one fold. Without
    copies these are the folds of ``StratifiedKFold`` over the sequences themselves."""
    from sklearn.model_selection import StratifiedKFold

    distinct: dict[tuple[int, str], int] = {}
    unit = np.array(
        [
            distinct.setdefault((int(y), s), len(distinct))
            for s, y in zip(sequences, labels, strict=True)
        ]
    )
    unit_labels = np.array([y for y, _ in distinct])
    splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return [
        (np.flatnonzero(np.isin(unit, train)), np.flatnonzero(np.isin(unit, test)))
        for train, test in splits.split(np.zeros((len(distinct), 1)), unit_labels)
    ]


@dataclass
class DiscriminatorResult:
    """Cross-validated AUROC of generated (positive) vs real (negative)."""

    auroc: float  # mean over folds
    auroc_sd: float  # standard deviation over folds
    auroc_min: float
    auroc_max: float
    fold_aurocs: list[float]
    folds: int
    k: int
    samples: int
    reference: int
    classifier: str = "logistic regression (L2, C=1) on standardised k-mer frequencies"

    def to_dict(self) -> dict:
        return asdict(self)


def discriminator_auroc(
    samples: Sequence[str],
    reference: Sequence[str],
    alphabet: str,
    k: int = DISCRIMINATOR_K,
    folds: int = FOLDS,
    seed: int = 0,
) -> DiscriminatorResult:
    """Cross-validated AUROC of a k-mer classifier (k-mers of ``alphabet``), samples vs reference
    (see the module doc). ``folds`` is lowered to the number of distinct sequences of the smaller
    set when that is smaller (at least 2 distinct sequences a side are needed)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    folds = min(folds, len(set(samples)), len(set(reference)))
    if folds < 2:
        raise ValueError(
            "the discriminator needs at least 2 distinct generated and 2 distinct reference "
            f"sequences (copies of one sequence stay in one fold), got {len(set(samples))} and "
            f"{len(set(reference))}"
        )
    features = kmer_features([*samples, *reference], alphabet, k)
    labels = np.r_[np.ones(len(samples), dtype=int), np.zeros(len(reference), dtype=int)]
    classifier = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))
    splits = folds_keeping_copies_together([*samples, *reference], labels, folds, seed)
    with threadpool_limits(limits=1, user_api="blas"):
        scores = cross_val_score(classifier, features, labels, cv=splits, scoring="roc_auc")
    return DiscriminatorResult(
        auroc=float(scores.mean()),
        auroc_sd=float(scores.std()),
        auroc_min=float(scores.min()),
        auroc_max=float(scores.max()),
        fold_aurocs=[float(s) for s in scores],
        folds=folds,
        k=k,
        samples=len(samples),
        reference=len(reference),
    )
