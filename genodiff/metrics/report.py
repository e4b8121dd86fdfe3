"""Writing a sample-quality report: ``metrics.json``, ``metrics.md`` and PNG plots; with an
oracle (``genodiff.metrics.oracle``), a top-level report by class and one suite report per class.

Plots are drawn on ``matplotlib.figure.Figure`` objects (no pyplot, so no backend or global
state is touched) and saved as PNG: ``kmer_spectra.png`` (dinucleotide frequencies, and every
``kmax``-mer's frequency in the samples against the reference) and ``gc_histogram.png``
(per-sequence GC content and CpG observed/expected). Every file is written atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from genodiff.atomic_files import check_writable, save_figure, write_text
from genodiff.errors import InputFileExistsError, InputValueError
from genodiff.metrics.composition import cpg_observed_expected, gc_content
from genodiff.metrics.kmers import js_divergence, kmer_spectrum
from genodiff.metrics.oracle import ORACLE_KS, OracleQuality
from genodiff.metrics.suite import SampleQuality

REPORT_FILES = ("metrics.json", "metrics.md", "kmer_spectra.png", "gc_histogram.png")


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None or np.isnan(value) else f"{value:.{digits}f}"


def _baseline(means: dict[str, float], sds: dict[str, float], k: str) -> str:
    """The real-vs-real k-mer JS of ``k``: its mean +- sd over the splits."""
    return f"{_number(means[k])} +- {_number(sds[k])}"


def _mean_sd(stats: dict[str, float | None], side: str) -> str:
    """``mean +- sd`` of one side of a ``DistributionComparison``; "-" when undefined."""
    if stats[f"{side}_mean"] is None:
        return "-"
    return f"{stats[f'{side}_mean']:.3f} +- {stats[f'{side}_sd']:.3f}"


def markdown_table(metrics: dict[str, Any]) -> str:
    """The report's Markdown: one row per metric, samples beside the reference."""
    m = metrics
    st = m["settings"]
    rows = [
        (
            "sequences (mean length, bp)",
            f"{m['samples']['sequences']} ({m['samples']['mean_length']:.0f})",
            f"{m['reference']['sequences']} windows ({m['reference']['mean_length']:.0f})",
            "",
        )
    ]
    held, pool = m["reference"]["real_vs_real_windows"]
    rows += [
        (
            f"{k}-mer spectrum JS divergence (bits)",
            _number(js),
            f"{_baseline(m['kmer_js_real_vs_real'], m['kmer_js_real_vs_real_sd'], k)} "
            "(real vs real)",
            ""
            if i
            else "0 = same k-mer frequencies, 1 = disjoint. Each of "
            f"{m['reference']['real_vs_real_splits']} random splits holds {held} reference "
            f"windows out (as many as samples) and pools the other {pool}; the samples and the "
            "held-out windows are each compared with the pool. Samples: the mean over the "
            "splits; reference column: the held-out windows' mean +- sd, what real DNA scores "
            "in the samples' place (a perfect generator lands within it)",
        )
        for i, (k, js) in enumerate(m["kmer_js"].items())
    ]
    for key, label in (("gc_content", "GC content"), ("cpg_oe", "CpG observed/expected")):
        d = m[key]
        rows.append(
            (
                f"{label}, mean +- sd",
                _mean_sd(d, "samples"),
                _mean_sd(d, "reference"),
                "-"
                if d["wasserstein"] is None
                else f"Wasserstein {d['wasserstein']:.4f}; KS D {d['ks_statistic']:.3f} "
                f"(p {d['ks_pvalue']:.2g})",
            )
        )
    side_by_side = [
        ("homopolymer_fraction", f"bases in homopolymers >= {st['min_homopolymer']} bp", ""),
        (
            "low_complexity_fraction",
            f"low-complexity bases (DUST level {st['dust_level']}, {st['dust_window']} bp)",
            "",
        ),
        ("duplicate_rate", "exact-duplicate rate", "0 = all distinct"),
        (
            "pairwise_kmer_distance",
            f"mean pairwise {st['diversity_k']}-mer Jaccard distance",
            "below the reference = less diverse",
        ),
    ]
    rows += [
        (label, _number(m[key]["samples"]), _number(m[key]["reference"]), note)
        for key, label, note in side_by_side
    ]
    if "memorisation" in m:
        mem = m["memorisation"]
        rows.append(
            (
                "nearest training neighbour identity, median / max",
                f"{_number(mem['median_identity'], 3)} / {_number(mem['max_identity'], 3)}",
                "",
                f"{mem['flagged']} of {m['samples']['sequences']} samples at >= "
                f"{mem['threshold']} (copies of the training set)" + _capped_note(mem["capped"]),
            )
        )
    d = m["discriminator"]  # None: too few groups of near-copies (the warnings say)
    name, value = "discriminator AUROC", "-"
    if d is not None:
        name += f" ({d['folds']}-fold, k-mers up to {d['k']}): mean +- sd over folds (range)"
        value = (
            f"{d['auroc']:.3f} +- {d['auroc_sd']:.3f} ({d['auroc_min']:.3f}-{d['auroc_max']:.3f})"
        )
    rows.append(
        (name, value, "", "0.5 = indistinguishable from the reference, 1 = always told apart")
    )
    if "generative_perplexity" in m:
        g = m["generative_perplexity"]
        rows.append(
            (
                "generative perplexity under the AR checkpoint, +- standard error",
                f"{g['samples']['gen_ppl']:.4f} +- {g['samples']['gen_ppl_se'] or 0:.4f}",
                f"{g['reference']['gen_ppl']:.4f} +- {g['reference']['gen_ppl_se'] or 0:.4f}",
                g["checkpoint"],
            )
        )
    lines = [
        "# Sample quality",
        "",
        f"Samples: {m['samples'].get('file', '(in memory)')}; "
        f"reference: {m['reference'].get('file', '(in memory)')}"
        + (f"; training set: {m['train'].get('file', '(in memory)')}" if "train" in m else ""),
        "",
        "| metric | samples | reference | note |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    if m["warnings"]:
        lines += ["", *(f"**Warning:** {warning}" for warning in m["warnings"])]
    return "\n".join(lines) + "\n"


def plot_kmer_spectra(quality: SampleQuality, k: int | None = None) -> Figure:
    """Dinucleotide frequencies side by side (ticked with the samples' alphabet), and every
    k-mer's frequency (k = ``kmax``) in the samples against the reference on log axes. k-mers
    absent from either side have no place on log axes: they are left out and counted in the
    legend. The titles give the JS divergence of what is drawn: the samples against every
    reference window."""
    k = k or quality.metrics["settings"]["kmax"]
    alphabet = quality.alphabet
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    bars, scatter = figure.subplots(1, 2)
    spectra = [kmer_spectrum(seqs, 2, alphabet) for seqs in (quality.samples, quality.reference)]
    x = np.arange(len(alphabet) ** 2)
    for shift, freq, label in zip((-0.2, 0.2), spectra, ("samples", "reference"), strict=True):
        bars.bar(x + shift, freq, width=0.4, label=label)
    bars.set_xticks(x, [a + b for a in alphabet for b in alphabet], rotation=90)
    bars.set_ylabel("frequency")
    bars.set_title(f"dinucleotides (JS {js_divergence(*spectra):.4f} bits)")
    bars.legend()
    p, q = (kmer_spectrum(seqs, k, alphabet) for seqs in (quality.samples, quality.reference))
    both = (p > 0) & (q > 0)
    scatter.loglog(q[both], p[both], ".", alpha=0.4, markersize=3, label=f"in both ({both.sum()})")
    for absent, where in ((p == 0) & (q > 0), "samples"), ((q == 0) & (p > 0), "reference"):
        scatter.plot([], [], " ", label=f"never in the {where} (not drawn): {absent.sum()}")
    low = min(p[p > 0].min(), q[q > 0].min()) / 1.5
    high = max(p.max(), q.max()) * 1.5
    scatter.plot([low, high], [low, high], "k--", linewidth=0.8)
    scatter.legend(loc="upper left", fontsize="small")
    scatter.set_xlabel(f"reference {k}-mer frequency")
    scatter.set_ylabel(f"sample {k}-mer frequency")
    scatter.set_title(f"{len(alphabet) ** k} {k}-mers (JS {js_divergence(p, q):.4f} bits)")
    return figure


def plot_gc_histograms(quality: SampleQuality) -> Figure:
    """Per-sequence GC content and CpG observed/expected, samples over the reference."""
    figure = Figure(figsize=(11, 4), layout="constrained")
    for axis, statistic, label in zip(
        figure.subplots(1, 2),
        (gc_content, cpg_observed_expected),
        ("GC content", "CpG observed/expected"),
        strict=True,
    ):
        values = [
            np.array([statistic(s, quality.alphabet) for s in seqs])
            for seqs in (quality.samples, quality.reference)
        ]
        values = [v[~np.isnan(v)] for v in values]
        bins = np.histogram_bin_edges(np.concatenate(values), bins=30)
        for v, name in zip(values, ("samples", "reference"), strict=True):
            if v.size:
                axis.hist(v, bins=bins, density=True, alpha=0.5, label=f"{name} ({v.size})")
            else:  # no histogram of no value (CpG o/e of sequences without C or G)
                axis.plot([], [], " ", label=f"{name}: undefined for every sequence")
        axis.set_xlabel(f"{label} per sequence")
        axis.set_ylabel("density")
        axis.legend()
    return figure


def check_report_folder(out: str | os.PathLike, overwrite: bool = True) -> Path:
    """``out`` as a folder ``write_report`` may write into; InputValueError when it is a file
    or cannot be written (``genodiff.atomic_files.check_writable``), InputFileExistsError when
    it holds a report already and not ``overwrite``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputValueError(
            f"{out} is a file; the report is a folder ({', '.join(REPORT_FILES)}): "
            "name a new folder, or one to add them to",
            parameter="out",
        )
    held = [name for name in REPORT_FILES[:2] if (out / name).exists()]
    if held and not overwrite:
        raise InputFileExistsError(
            f"{out} holds a report already ({', '.join(held)}): choose another folder, or "
            "overwrite it",
            parameter=("out", "overwrite"),
        )
    check_writable(out / REPORT_FILES[0], "out")  # before the metrics, not after
    return out


def write_report(quality: SampleQuality, out: str | os.PathLike) -> list[Path]:
    """Write ``REPORT_FILES`` into ``out`` (created if needed; other files there are left
    alone), each atomically, and return their paths."""
    out = check_report_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in REPORT_FILES]
    json_path, md_path, spectra_path, gc_path = paths
    write_text(json_path, json.dumps(quality.metrics, indent=2) + "\n")
    write_text(md_path, markdown_table(quality.metrics))
    save_figure(plot_kmer_spectra(quality), spectra_path)
    save_figure(plot_gc_histograms(quality), gc_path)
    return paths


def _capped_note(capped: int) -> str:
    """What the memorisation row says when repeated seeds' hits were left out."""
    if not capped:
        return ""
    return (
        f"; {capped} sample(s) hit so many repeat copies that some seed hits were left out: "
        "their identity is a lower bound"
    )


def oracle_markdown(metrics: dict[str, Any]) -> str:
    """The oracle report's Markdown: the oracle's verdict, one row per class, the confusion
    counts."""
    m = metrics
    oracle, asked = m["oracle"], m["samples"]["per_class"]
    classes = m["oracle_confusion"]["classes"]
    lines = [
        "# Sample quality by class, with an oracle",
        "",
        f"Samples: {m['samples'].get('file', '(in memory)')}; oracle: "
        f"{oracle.get('checkpoint', '(in memory)')} (classes {', '.join(classes)})",
        "",
        f"**Oracle accuracy {m['oracle_accuracy']:.3f}, macro-F1 {m['oracle_macro_f1']:.3f}** "
        f"on {m['samples']['sequences']} samples (macro-F1 over the {len(asked)} class(es) "
        "samples were drawn for).",
        "",
        "The oracle says whether the samples are of their class; the columns after it say "
        "whether they look like real DNA of that class. Discriminator AUROC: 0.5 = a k-mer "
        "classifier cannot tell the samples from the class's real DNA, 1 = it always can; GC "
        "and CpG o/e: the samples' mean against the real DNA's. High accuracy with an AUROC "
        "near 1, or a composition far from the real one, means caricatures of the class, not "
        "real-like DNA: lower the guidance.",
        "",
        "| class | samples | oracle agrees | discriminator AUROC | GC (real) | CpG o/e (real) "
        "| 3-mer JS (real vs real +- sd) | 6-mer JS (real vs real +- sd) "
        "| duplicates (reference) | pairwise 6-mer distance (reference) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, counts in asked.items():
        js, baseline = m["kmer_js"][name], m["kmer_js_real_vs_real"][name]
        baseline_sd = m["kmer_js_real_vs_real_sd"][name]
        dup, dist = m["duplicate_rate"][name], m["pairwise_kmer_distance"][name]
        cells = [
            name,
            str(counts["sequences"]),
            _number(counts["oracle_accuracy"], 3),
            _number(m["discriminator_auroc"][name], 3),
            *(
                f"{_number(m[key][name]['samples'], 3)} ({_number(m[key][name]['reference'], 3)})"
                for key in ("gc_content", "cpg_oe")
            ),
            *(f"{_number(js[k])} ({_baseline(baseline, baseline_sd, k)})" for k in ORACLE_KS),
            f"{_number(dup['samples'], 3)} ({_number(dup['reference'], 3)})",
            f"{_number(dist['samples'], 3)} ({_number(dist['reference'], 3)})",
        ]
        lines.append(f"| {' | '.join(cells)} |")
    lines += [
        "",
        "Confusion counts (rows: the class a sample was drawn for; columns: the oracle's call):",
        "",
        f"| drawn for \\ oracle | {' | '.join(classes)} |",
        f"| --- |{' --- |' * len(classes)}",
    ]
    counts = m["oracle_confusion"]["counts"]
    lines += [
        f"| {name} | {' | '.join(str(c) for c in counts[classes.index(name)])} |" for name in asked
    ]
    lines += ["", "Each class's full report: " + ", ".join(f"{n}/metrics.md" for n in asked)]
    if m["warnings"]:
        lines += ["", *(f"**Warning:** {warning}" for warning in m["warnings"])]
    return "\n".join(lines) + "\n"


def write_oracle_report(quality: OracleQuality, out: str | os.PathLike) -> list[Path]:
    """``metrics.json`` and ``metrics.md`` (``oracle_markdown``) in ``out``, and every class's
    suite report (``write_report``) in ``out/<class>/``; returns the paths written."""
    out = check_report_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "metrics.json", out / "metrics.md"
    write_text(json_path, json.dumps(quality.metrics, indent=2) + "\n")
    write_text(md_path, oracle_markdown(quality.metrics))
    paths = [json_path, md_path]
    for name, class_quality in quality.per_class.items():
        paths += write_report(class_quality, out / name)
    return paths
