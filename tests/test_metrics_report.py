"""The sample-quality report reads on its own: a real-vs-real baseline (mean +- sd over random
splits, the samples compared with the same pools) beside every JS row, a
warning when too few samples make the discriminator AUROC unreliable, and a k-mer scatter plot
that draws only k-mers both sides produced."""

import json
from collections import Counter

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from genodiff.domains import DNADomain
from genodiff.errors import InputValueError
from genodiff.metrics import (
    QualitySettings,
    evaluate_samples,
    heldout_kmer_js,
    markdown_table,
    plot_gc_histograms,
    plot_kmer_spectra,
    write_report,
)
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


def test_js_rows_carry_the_real_vs_real_baseline_on_the_same_pools():
    reference = random_dna(12, 60, seed=1, p=(0.4, 0.1, 0.1, 0.4))  # 12 windows of 60 bp
    samples = random_dna(4, 60, seed=2)
    quality = evaluate_samples(samples, reference, DNA, settings=QualitySettings(splits=5))
    metrics = quality.metrics
    assert metrics["reference"]["real_vs_real_windows"] == [4, 8]
    assert metrics["reference"]["real_vs_real_splits"] == 5
    again = heldout_kmer_js(samples, reference, DNA, range(1, 7), splits=5, seed=0)
    held_out = [set(rows.tolist()) for rows in again.held_out]
    assert all(len(rows) == 4 for rows in held_out) and len(set(map(frozenset, held_out))) == 5
    table = markdown_table(metrics)
    for k in range(1, 7):
        ours, real = [], []
        for rows in held_out:  # the pool: the 8 windows not held out, for both sides
            pool = [w for i, w in enumerate(reference) if i not in rows]
            ours.append(js_bits(samples, pool, k))
            real.append(js_bits([reference[i] for i in sorted(rows)], pool, k))
        assert metrics["kmer_js"][str(k)] == pytest.approx(np.mean(ours), abs=1e-12)
        assert metrics["kmer_js_real_vs_real"][str(k)] == pytest.approx(np.mean(real), abs=1e-12)
        sd = np.std(real, ddof=1)
        assert metrics["kmer_js_real_vs_real_sd"][str(k)] == pytest.approx(sd, abs=1e-12)
        row = next(line for line in table.splitlines() if line.startswith(f"| {k}-mer spectrum"))
        assert f"| {np.mean(real):.4f} +- {sd:.4f} (real vs real) |" in row
    assert "5 random splits holds 4 reference windows out" in table
    assert "pools the other 8" in table


@pytest.mark.parametrize("windows", [46, 96])
def test_perfect_samples_score_like_the_real_vs_real_baseline(windows):
    """Samples that are more windows of the same i.i.d. source as the reference (a perfect
    generator) score like the held-out real windows: over 10 independent draws, their JS minus
    the baseline is centred on 0 in units of the baseline's sd, and never beyond 3.5 sd. Against
    every reference window instead (the samples' former number) they would sit far below the
    baseline when the reference is not much larger than the samples (46 windows for 32)."""
    z = []
    for draw in range(10):
        reference = random_dna(windows, 200, seed=100 + draw)
        samples = random_dna(32, 200, seed=200 + draw)
        c = heldout_kmer_js(samples, reference, DNA, range(1, 7), splits=20, seed=draw)
        z.append([(c.samples[k].mean() - c.real[k].mean()) / c.real[k].std(ddof=1) for k in c.real])
    z = np.array(z)  # (draws, k)
    assert np.abs(z).max() < 3.5
    assert np.abs(z.mean(axis=0)).max() < 1.0  # 10 draws: the mean's sd is about 0.3
    if windows == 46:
        all_windows = js_bits(samples, reference, 6)
        assert all_windows < c.real[6].mean() - 5 * c.real[6].std(ddof=1)


def test_a_small_reference_is_warned_about_and_too_small_a_one_refused():
    samples = random_dna(32, 100, seed=1)
    with pytest.warns(UserWarning, match="only 46 reference windows for 32 samples") as caught:
        metrics = evaluate_samples(samples, random_dna(46, 100, seed=2), DNA).metrics
    assert len(caught) == 1
    (warning,) = [w for w in metrics["warnings"] if "reference windows" in w]
    assert "the 14 windows left after holding 32 out" in warning
    assert "give at least 64 reference windows" in warning
    assert f"**Warning:** {warning}" in markdown_table(metrics)
    with pytest.raises(InputValueError, match="32 reference windows for 32 samples") as refused:
        evaluate_samples(samples, random_dna(32, 100, seed=2), DNA)
    assert "give at least 64" in str(refused.value)
    assert refused.value.parameter == ("reference", "max_reference")


def test_the_baseline_is_fixed_by_the_seed():
    samples, reference = random_dna(5, 80, seed=1), random_dna(30, 80, seed=2)
    first, again, other = (
        evaluate_samples(samples, reference, DNA, settings=QualitySettings(seed=seed)).metrics
        for seed in (0, 0, 1)
    )
    for key in ("kmer_js", "kmer_js_real_vs_real", "kmer_js_real_vs_real_sd"):
        assert first[key] == again[key] and first[key] != other[key]
    with pytest.raises(InputValueError, match="splits must be >= 2"):
        QualitySettings(splits=1)


@pytest.mark.parametrize(
    ("setting", "value"),
    # each crashed inside the suite before (a broadcast error, an empty concatenation, k >= 1
    # from a helper) or gave a meaningless number (every base a "homopolymer", no k-mer at all)
    [("dust_window", 2), ("discriminator_k", 0), ("diversity_k", 0), ("seed_k", 0),
     ("kmax", 0), ("min_homopolymer", 1), ("dust_level", -1)],
)  # fmt: skip
def test_a_setting_the_suite_cannot_use_is_refused_by_name(setting, value):
    with pytest.raises(InputValueError, match=f"^{setting} must be >= .*, got {value}$") as bad:
        QualitySettings(**{setting: value})
    assert bad.value.parameter == setting


@pytest.mark.parametrize(("n", "warned"), [(10, True), (40, False)])
def test_too_few_samples_for_the_discriminator_are_warned_about(n, warned):
    reference = random_dna(80, 50, seed=4)  # 2n windows for 40 samples: no warning about them
    metrics = evaluate_samples(random_dna(n, 50, seed=3), reference, DNA).metrics
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


def cpg_oe_by_hand(seq: str) -> float:
    """CpG * n / (C * G) for a sequence of A/C/G/T only."""
    return seq.count("CG") * len(seq) / (seq.count("C") * seq.count("G"))


def test_samples_without_c_or_g_leave_cpg_undefined_and_the_report_whole(tmp_path):
    """Samples made of A and T alone (a collapsed generator, an AT-rich genome): CpG o/e is
    undefined for each of them, so its comparison has no samples side, while the reference's
    side and every other metric are still reported (was: ValueError, no report)."""
    samples = random_dna(6, 60, seed=7, p=(0.5, 0.0, 0.0, 0.5))
    reference = random_dna(20, 60, seed=8)
    quality = evaluate_samples(samples, reference, DNA)
    cpg = quality.metrics["cpg_oe"]
    assert cpg["samples_mean"] is None and cpg["samples_sd"] is None
    assert cpg["wasserstein"] is None and cpg["ks_statistic"] is None
    by_hand = np.array([cpg_oe_by_hand(w) for w in reference])
    assert cpg["reference_mean"] == pytest.approx(by_hand.mean(), abs=1e-12)
    assert cpg["reference_sd"] == pytest.approx(by_hand.std(), abs=1e-12)
    assert quality.metrics["gc_content"]["samples_mean"] == 0.0
    warning = "cpg_oe is undefined for every sequence of the samples (no C or no G)"
    assert any(w.startswith(warning) for w in quality.metrics["warnings"])
    row = next(line for line in markdown_table(quality.metrics).splitlines() if "CpG" in line)
    reference_cell = f"{by_hand.mean():.3f} +- {by_hand.std():.3f}"
    assert row == f"| CpG observed/expected, mean +- sd | - | {reference_cell} | - |"
    written = write_report(quality, tmp_path / "report")
    assert json.loads(written[0].read_text())["cpg_oe"]["samples_mean"] is None
    labels = [t.get_text() for t in plot_gc_histograms(quality).axes[1].get_legend().get_texts()]
    assert labels == ["samples: undefined for every sequence", f"reference ({len(reference)})"]


def test_each_plus_minus_in_the_report_says_what_it_is():
    """The table's +- are standard deviations (k-mer baseline, GC, CpG o/e, the AUROC over
    folds) except generative perplexity's, a standard error: each row names its own (the AUROC
    and Gen PPL rows named none, so a reader took Gen PPL's standard error for an sd)."""
    samples, reference = random_dna(40, 80, seed=11), random_dna(80, 80, seed=12)
    metrics = evaluate_samples(samples, reference, DNA).metrics
    metrics["generative_perplexity"] = {
        "checkpoint": "ar.ckpt",
        "samples": {"gen_ppl": 3.9, "gen_ppl_se": 0.0125},
        "reference": {"gen_ppl": 3.8, "gen_ppl_se": 0.0075},
    }
    rows = markdown_table(metrics).splitlines()
    folds = metrics["discriminator"]["fold_aurocs"]
    spread = f"{np.mean(folds):.3f} +- {np.std(folds):.3f} ({min(folds):.3f}-{max(folds):.3f})"
    (auroc,) = [row for row in rows if f"| {spread} |" in row]
    assert auroc.startswith("| discriminator AUROC (5-fold, k-mers up to 4): mean +- sd over folds")
    (gen_ppl,) = [row for row in rows if "| 3.9000 +- 0.0125 | 3.8000 +- 0.0075 |" in row]
    assert "+- standard error" in gen_ppl.split("|")[1]
