"""A discriminator two-sample test: can a classifier tell generated DNA from real DNA?

Each sequence becomes its k-mer frequencies for every k in 1..``k`` (each k's counts divided
by that k's total, so sequence length does not matter); a logistic regression on
standardised features is scored by stratified ``folds``-fold cross-validated AUROC, the
generated sequences being the positive class. Near-copies stay in one fold: the sequences of
one side linked, directly or through others, by sharing at least ``NEAR_COPY_JACCARD`` of their
``NEAR_COPY_K``-mers (Jaccard similarity of the sets; copies share all) form a group, and the
folds split groups, not sequences. A fold holding out a sample whose near-copy it trained on
scores the classifier's memory of that sample, not what tells the sets apart: samples drawn
from one law with the reference, each as 4 copies, scored 0.97 that way, and 0.98 when the
copies differed in 1% of their bases (unrelated 1-kb stretches share about none of their
12-mers). Without near-copies the folds are those of stratified k-fold over the sequences.
0.5 means the classifier cannot tell the two sets apart from their k-mer content (it says
nothing about longer-range structure); 1.0 means it separates them perfectly. The fold spread
is reported beside the mean.

The fits run on one BLAS thread: the problem is small (a few thousand sequences, a few hundred
features), and NumPy's and SciPy's OpenBLAS threads spin while they wait, so on a machine whose
cores are busy two threads made each fit ~10x slower than one (BENCHMARKS.md, "The sample
report's discriminator on one BLAS thread").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from genodiff.errors import InputValueError
from genodiff.metrics.kmers import kmer_indices, kmer_profiles
from genodiff.metrics.sequences import base_codes

DISCRIMINATOR_K = 4
FOLDS = 5
# Below this many generated sequences the per-fold AUROCs spread widely, so their mean says
# little: 8 real training windows of the demo genome against its 97 test windows score
# 0.11-0.87 over the five folds, 40 windows 0.44-0.79.
MIN_SAMPLES_FOR_AUROC = 30
NEAR_COPY_K = 12
NEAR_COPY_JACCARD = 0.1  # share of k-mers (Jaccard) that makes two sequences near-copies


class TooFewGroupsError(InputValueError):
    """A side holds fewer than 2 groups of near-copies: no fold can hold one out."""


def kmer_features(sequences: Sequence[str], alphabet: str, k: int = DISCRIMINATOR_K) -> np.ndarray:
    """Per sequence, the k-mer frequencies (of ``alphabet``, N letters) for k = 1..``k`` side
    by side: (n, sum N^j)."""
    blocks = []
    for j in range(1, k + 1):
        counts = kmer_profiles(sequences, j, alphabet)
        totals = counts.sum(axis=1, keepdims=True)
        blocks.append(np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0))
    return np.concatenate(blocks, axis=1)


def near_copy_groups(
    sequences: Sequence[str],
    alphabet: str,
    k: int = NEAR_COPY_K,
    threshold: float = NEAR_COPY_JACCARD,
) -> np.ndarray:
    """Group id (N,) of each sequence: the connected components of the graph linking equal
    sequences and those whose sets of ``k``-mers (of ``alphabet``) have a Jaccard similarity of
    at least ``threshold``."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    distinct: dict[str, int] = {}
    unit = np.array([distinct.setdefault(s, len(distinct)) for s in sequences])  # (N,)
    kmer_sets = [
        np.unique(kmer_indices(base_codes(s, alphabet), k, len(alphabet))) for s in distinct
    ]
    kmer_sets = [kmers[kmers >= 0] for kmers in kmer_sets]
    rows = np.repeat(np.arange(len(kmer_sets)), [len(kmers) for kmers in kmer_sets])
    _, columns = np.unique(np.concatenate([np.empty(0, np.int64), *kmer_sets]), return_inverse=True)
    present = sparse.csr_matrix(
        (np.ones(len(rows)), (rows, columns)),
        shape=(len(kmer_sets), int(columns.max(initial=-1)) + 1),
    )  # (U, distinct k-mers)
    shared = (present @ present.T).tocoo()  # (U, U): k-mers two sequences share
    sizes = np.asarray(present.sum(axis=1)).ravel()
    union = sizes[shared.row] + sizes[shared.col] - shared.data
    near = shared.data >= threshold * union
    graph = sparse.coo_matrix(
        (np.ones(int(near.sum())), (shared.row[near], shared.col[near])), shape=shared.shape
    )
    return connected_components(graph, directed=False)[1][unit]


def folds_keeping_groups_together(
    groups: np.ndarray, labels: np.ndarray, folds: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) indices of stratified ``folds``-fold cross-validation (shuffled by
    ``seed``) over the distinct (label, group) pairs, each pair's sequences in one fold. With
    every group one sequence these are the folds of ``StratifiedKFold`` over the sequences."""
    from sklearn.model_selection import StratifiedKFold

    distinct: dict[tuple[int, int], int] = {}
    unit = np.array(
        [
            distinct.setdefault((int(y), int(g)), len(distinct))
            for g, y in zip(groups, labels, strict=True)
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
    sample_groups: int  # groups of near-copies the folds split (= samples without any)
    reference_groups: int
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
    (see the module doc). ``folds`` is lowered to the number of groups of near-copies of the
    smaller set when that is smaller; TooFewGroupsError when a side has fewer than 2."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    groups = near_copy_groups([*samples, *reference], alphabet)
    labels = np.r_[np.ones(len(samples), dtype=int), np.zeros(len(reference), dtype=int)]
    counts = [len(set(groups[labels == side].tolist())) for side in (1, 0)]
    folds = min(folds, *counts)
    if folds < 2:
        raise TooFewGroupsError(
            f"the discriminator needs at least 2 groups of near-copies a side (near-copies stay "
            f"in one fold), got {counts[0]} among the samples and {counts[1]} among the reference"
        )
    features = kmer_features([*samples, *reference], alphabet, k)
    classifier = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))
    splits = folds_keeping_groups_together(groups, labels, folds, seed)
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
        sample_groups=counts[0],
        reference_groups=counts[1],
    )
