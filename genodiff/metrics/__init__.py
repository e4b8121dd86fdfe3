"""Is generated DNA any good? Sample-quality metrics against real reference DNA.

One module per family of metrics, each usable on its own:

- ``kmers``: k-mer spectra and their Jensen-Shannon divergence (k = 1..6), samples and real
  windows compared with the same reference pools;
- ``composition``: GC content, CpG observed/expected, homopolymer runs, DUST-style low
  complexity;
- ``diversity``: exact duplicates, pairwise k-mer distance, nearest-neighbour identity to the
  training set (memorisation);
- ``discriminator``: cross-validated AUROC of a k-mer classifier, generated vs real;
- ``likelihood``: generative perplexity under an autoregressive DNA checkpoint;
- ``suite`` runs them all, ``report`` writes ``metrics.json``, ``metrics.md`` and PNG plots;
- ``oracle``: samples drawn for classes, judged by a ``genodiff finetune`` classifier, and the
  suite class by class against real sequences of each class.

From the command line: ``genodiff evaluate-samples GEN.fa --reference REAL.fa
[--train TRAIN.fa] [--ar-checkpoint AR.ckpt] [--out DIR]``; with an oracle,
``genodiff evaluate-samples GEN.fa --oracle CLF.ckpt --reference NAME=REAL.fa ... [--label NAME]``.
"""

from genodiff.metrics.composition import (
    DistributionComparison,
    cpg_observed_expected,
    dust_scores,
    gc_content,
    homopolymer_bases,
    low_complexity_bases,
)
from genodiff.metrics.discriminator import DiscriminatorResult, discriminator_auroc
from genodiff.metrics.diversity import (
    Memorisation,
    NearestNeighbour,
    TrainingIndex,
    duplicate_rate,
    nearest_neighbours,
    pairwise_kmer_distance,
)
from genodiff.metrics.kmers import (
    HeldOutComparison,
    heldout_kmer_js,
    js_divergence,
    kmer_js,
    kmer_profiles,
    kmer_spectrum,
)
from genodiff.metrics.oracle import (
    OracleQuality,
    evaluate_files_with_oracle,
    evaluate_with_oracle,
    oracle_scores,
)
from genodiff.metrics.report import (
    REPORT_FILES,
    check_report_folder,
    markdown_table,
    oracle_markdown,
    plot_gc_histograms,
    plot_kmer_spectra,
    write_oracle_report,
    write_report,
)
from genodiff.metrics.sequences import read_sequences, tile_windows
from genodiff.metrics.suite import (
    QualitySettings,
    SampleQuality,
    evaluate_sample_files,
    evaluate_samples,
)

__all__ = [
    "REPORT_FILES",
    "DiscriminatorResult",
    "check_report_folder",
    "DistributionComparison",
    "HeldOutComparison",
    "Memorisation",
    "NearestNeighbour",
    "OracleQuality",
    "QualitySettings",
    "SampleQuality",
    "TrainingIndex",
    "cpg_observed_expected",
    "discriminator_auroc",
    "duplicate_rate",
    "dust_scores",
    "evaluate_files_with_oracle",
    "evaluate_sample_files",
    "evaluate_samples",
    "evaluate_with_oracle",
    "gc_content",
    "heldout_kmer_js",
    "homopolymer_bases",
    "js_divergence",
    "kmer_js",
    "kmer_profiles",
    "kmer_spectrum",
    "low_complexity_bases",
    "markdown_table",
    "nearest_neighbours",
    "oracle_markdown",
    "oracle_scores",
    "pairwise_kmer_distance",
    "plot_gc_histograms",
    "plot_kmer_spectra",
    "read_sequences",
    "tile_windows",
    "write_oracle_report",
    "write_report",
]
