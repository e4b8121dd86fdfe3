"""The sample-quality report reads on its own: a real-vs-real baseline beside every JS row, a
warning when too few samples make the discriminator AUROC unreliable, and a k-mer scatter plot
that draws only k-mers both sides produced."""

from collections import Counter

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from genodiff.domains import DNADomain
from genodiff.metrics import evaluate_samples, markdown_table, plot_kmer_spectra
from tests.test_metrics import random_dna

DNA = DNADomain.alphabet


def kmer_counts(sequences: list[str], k: int) -> Counter:
    return Counter(s[i : i + k] for s in sequences for i in range(len(s) - k + 1))


def js_bits(a: list[str], b: list[str], k: int) -> float:
    """JS divergence in bits between pooled k-mer frequencies, counted here by hand."""
    ca, cb = kmer_counts(a, k), kmer_counts(b, k)
    kmers = sorted(set(ca) | set(cb))
    p = np.array([ca[x] for x in kmers], dtype=float)
    q = np.array([cb[x] for x in kmers], dtype=float)
    return jensenshannon(p / p.sum(), q / q.sum(), base=2) ** 2


def test_js_rows_carry_the_real_vs_real_baseline():
    reference = random_dna(12, 60, seed=1, p=(0.4, 0.1, 0.1, 0.4))  # 12 windows of 60 bp
    samples = random_dna(4, 60, seed=2)
    metrics = evaluate_samples(samples, reference, DNA).metrics
    # 4 samples: 4 windows held out, evenly spread: floor(i * 11 / 3) for i = 0..3
    held_out = [0, 3, 7, 11]
    held = [reference[i] for i in held_out]
    rest = [w for i, w in enumerate(reference) if i not in held_out]
    assert metrics["reference"]["real_vs_real_windows"] == [4, 8]
    table = markdown_table(metrics)
    for k in range(1, 7):
        expected = js_bits(held, rest, k)
        assert metrics["kmer_js_real_vs_real"][str(k)] == pytest.approx(expected, abs=1e-12)
        assert metrics["kmer_js"][str(k)] == pytest.approx(js_bits(samples, reference, k))
        row = next(line for line in table.splitlines() if line.startswith(f"| {k}-mer spectrum"))
        assert f"| {expected:.4f} (real vs real) |" in row
    assert "4 held-out reference windows against the other 8" in table


@pytest.mark.parametrize(("n", "warned"), [(10, True), (40, False)])
def test_too_few_samples_for_the_discriminator_are_warned_about(n, warned):
    metrics = evaluate_samples(random_dna(n, 50, seed=3), random_dna(40, 50, seed=4), DNA).metrics
    assert bool(metrics["warnings"]) == warned
    table = markdown_table(metrics)
    assert ("**Warning:** only 10 samples: with fewer than 30" in table) == warned
    assert ("**Warning:**" in table) == warned


def test_the_scatter_plot_draws_only_kmers_both_sides_produced():
    samples = random_dna(3, 60, seed=5)  # at most 165 of the 4,096 6-mers
    reference = random_dna(20, 60, seed=6)
    quality = evaluate_samples(samples, reference, DNA)
    scatter = plot_kmer_spectra(quality).axes[1]
    ours, theirs = kmer_counts(samples, 6), kmer_counts(reference, 6)
    both = set(ours) & set(theirs)
    (points,) = [line for line in scatter.get_lines() if line.get_marker() == "."]
    xs, ys = np.asarray(points.get_xdata()), np.asarray(points.get_ydata())
    assert len(xs) == len(both) and (xs > 0).all() and (ys > 0).all()
    total = sum(ours.values())
    assert sorted(ys) == pytest.approx(sorted(ours[x] / total for x in both))
    labels = [text.get_text() for text in scatter.get_legend().get_texts()]
    assert f"never in the samples (not drawn): {len(set(theirs) - set(ours))}" in labels
    assert f"never in the reference (not drawn): {len(set(ours) - set(theirs))}" in labels
