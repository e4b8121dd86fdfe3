"""The whole sample-quality suite: generated DNA against real reference DNA.

``evaluate_samples`` takes sequences and their alphabet (the letters they are made of, which their
domain declares: ``genodiff.domains``), ``evaluate_sample_files`` FASTA files (the alphabet of their
domain by default); both return a ``SampleQuality`` whose ``metrics`` is the JSON-ready dictionary
``genodiff evaluate-samples`` writes as ``metrics.json``. Reference records longer than the samples
are tiled into windows of the samples' length (their median, or ``QualitySettings.window``) so that
per-sequence statistics compare like with like; at most ``max_reference`` windows, spread evenly
over the reference, are used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np

from genodiff.errors import InputValueError, listing
from genodiff.metrics.composition import (
    DUST_LEVEL,
    DUST_WINDOW,
    MIN_HOMOPOLYMER,
    DistributionComparison,
    cpg_observed_expected,
    gc_content,
    homopolymer_bases,
    low_complexity_bases,
    pooled_fraction,
)
from genodiff.metrics.discriminator import (
    DISCRIMINATOR_K,
    FOLDS,
    MIN_SAMPLES_FOR_AUROC,
    TooFewGroupsError,
    discriminator_auroc,
)
from genodiff.metrics.diversity import (
    DIVERSITY_K,
    IDENTITY_THRESHOLD,
    SEED_K,
    SEED_STRIDE,
    Memorisation,
    TrainingIndex,
    duplicate_rate,
    nearest_neighbours,
    pairwise_kmer_distance,
)
from genodiff.metrics.kmers import heldout_kmer_js
from genodiff.metrics.sequences import base_codes, evenly_spaced, read_sequences, tile_windows
from genodiff.progress import Progress, counted
from genodiff.user_warnings import warn_user

KMAX = 6
# Why a per-sequence statistic can be undefined for a sequence (DistributionComparison).
UNDEFINED = {"gc_content": "no letter of the alphabet", "cpg_oe": "no C or no G"}
# How an error names each input file (its argument: the parameter at fault).
INPUT_NAMES = {"samples": "samples file", "reference": "reference", "train": "training file"}


@dataclass
class QualitySettings:
    """Knobs of the suite (the defaults are what ``genodiff evaluate-samples`` uses)."""

    window: int | None = None  # reference window length; None: the samples' median length
    max_reference: int = 2000  # reference windows used at most
    kmax: int = KMAX  # k-mer Jensen-Shannon divergence for k = 1..kmax
    min_homopolymer: int = MIN_HOMOPOLYMER
    dust_window: int = DUST_WINDOW
    dust_level: int = DUST_LEVEL
    diversity_k: int = DIVERSITY_K
    discriminator_k: int = DISCRIMINATOR_K
    folds: int = FOLDS
    seed: int = 0  # discriminator folds and the k-mer comparison's random splits
    splits: int = 20  # random splits of the reference for the k-mer JS (heldout_kmer_js)
    seed_k: int = SEED_K
    seed_stride: int = SEED_STRIDE  # the memorisation index keeps every seed_stride-th k-mer
    identity_threshold: float = IDENTITY_THRESHOLD

    def __post_init__(self) -> None:
        """InputValueError naming the field (the ``genodiff evaluate-samples`` option of the
        same name, where there is one) of a value that cannot be used."""
        if self.window is not None and self.window < 1:
            raise InputValueError(
                f"window must be >= 1 bp (or None), got {self.window}", parameter="window"
            )
        for name, (least, why) in SETTING_MINIMUMS.items():
            if getattr(self, name) < least:
                raise InputValueError(
                    f"{name} must be >= {least}{f' ({why})' if why else ''}, "
                    f"got {getattr(self, name)}",
                    parameter=name,
                )
        if not 0 < self.identity_threshold <= 1:
            raise InputValueError(
                "identity_threshold must be in (0, 1] (the fraction of identical bases, at "
                f"most 1), got {self.identity_threshold}",
                parameter="identity_threshold",
            )


#: The least value of each whole-number setting of ``QualitySettings``, and why.
SETTING_MINIMUMS = {
    "max_reference": (2, "the suite compares distributions over at least 2 reference windows"),
    "kmax": (1, "the k-mer comparison counts k = 1..kmax"),
    "min_homopolymer": (2, "a homopolymer is a run of at least 2 of one letter"),
    "dust_window": (3, "DUST counts the triplets of each window"),
    "dust_level": (0, None),
    "diversity_k": (1, None),
    "discriminator_k": (1, "the discriminator reads k-mers of 1 to discriminator_k letters"),
    "folds": (2, "cross-validation trains on some folds and scores the others"),
    "seed": (0, None),
    "splits": (2, "the k-mer comparison reports a spread over the random splits of the reference"),
    "seed_k": (1, None),
    "seed_stride": (1, None),
}


@dataclass
class SampleQuality:
    """The metrics, the sequences they were computed on and their alphabet (for plots)."""

    metrics: dict[str, Any]
    samples: list[str]
    reference: list[str]  # the reference windows used
    alphabet: str


def _set_summary(sequences: Sequence[str], alphabet: str) -> dict[str, Any]:
    lengths = np.array([len(s) for s in sequences])
    return {
        "sequences": len(sequences),
        "bases": int(sum(np.count_nonzero(base_codes(s, alphabet) >= 0) for s in sequences)),
        "mean_length": float(lengths.mean()),
    }


def _side_by_side(
    samples: Sequence[str], reference: Sequence[str], metric: Callable[[Sequence[str]], float]
) -> dict[str, float]:
    return {"samples": metric(samples), "reference": metric(reference)}


def reference_windows(
    reference: Sequence[str], samples: Sequence[str], settings: QualitySettings, alphabet: str
) -> list[str]:
    """The reference windows the suite compares the samples with (see the module doc)."""
    window = settings.window or int(np.median([len(s) for s in samples]))
    windows = evenly_spaced(tile_windows(reference, window, alphabet), settings.max_reference)
    if len(windows) < 2:
        raise InputValueError(
            f"the reference yields {len(windows)} window(s) of {window} bp; at least 2 are needed"
        )
    return windows


def evaluate_samples(
    samples: Sequence[str],
    reference: Sequence[str],
    alphabet: str,
    train: Sequence[str] | None = None,
    settings: QualitySettings | None = None,
    ar_checkpoint: str | os.PathLike | None = None,
    device: str | None = None,
    progress: Progress | None = None,
) -> SampleQuality:
    """Every metric of the suite for ``samples`` against ``reference`` (sequences of the
    letters of ``alphabet``); the memorisation test when ``train`` (training records) is given,
    generative perplexity when ``ar_checkpoint`` is. ``progress`` hears of each stage as it
    starts."""
    stage = progress.note if progress is not None else _silent
    settings = settings or QualitySettings()
    samples = [s.upper() for s in samples]
    if len(samples) < 2:
        raise InputValueError(f"the suite needs at least 2 samples, got {len(samples)}")
    lengths = [len(s) for s in samples]
    short = [f"{i} ({n} bp)" for i, n in enumerate(lengths, start=1) if n < settings.kmax]
    if short:
        raise InputValueError(
            f"sample(s) {listing(short)} are shorter than {settings.kmax} bp, the longest k-mer "
            "the suite counts, so most metrics cannot read them; leave them out",
            parameter="samples",
        )
    windows = reference_windows([r.upper() for r in reference], samples, settings, alphabet)
    ks = range(1, settings.kmax + 1)
    stage(f"k-mer spectra of {len(samples)} samples and {len(windows)} reference windows")
    comparison = heldout_kmer_js(samples, windows, alphabet, ks, settings.splits, settings.seed)
    n, size = len(samples), len(windows)
    metrics: dict[str, Any] = {
        "samples": _set_summary(samples, alphabet),
        "reference": {
            **_set_summary(windows, alphabet),
            "records": len(reference),
            "real_vs_real_windows": [n, size - n],  # held out, pooled
            "real_vs_real_splits": settings.splits,
        },
        "kmer_js": {str(k): float(js.mean()) for k, js in comparison.samples.items()},
        "kmer_js_real_vs_real": {str(k): float(js.mean()) for k, js in comparison.real.items()},
        "kmer_js_real_vs_real_sd": {
            str(k): float(js.std(ddof=1)) for k, js in comparison.real.items()
        },
        "warnings": [],
    }
    if size < 2 * n:
        small = (
            f"only {size} reference windows for {n} samples: the k-mer JS (samples and real vs "
            f"real alike) compares with the {size - n} windows left after holding {n} out, "
            f"fewer than the samples, so both values are high and noisy; give at least "
            f"{2 * n} reference windows"
        )
        metrics["warnings"].append(small)
        warn_user(small)
    stage("composition, low complexity and diversity")
    for name, statistic in (("gc_content", gc_content), ("cpg_oe", cpg_observed_expected)):
        values = [np.array([statistic(x, alphabet) for x in seqs]) for seqs in (samples, windows)]
        comparison = DistributionComparison.of(*values)
        metrics[name] = comparison.to_dict()
        metrics["warnings"] += [
            f"{name} is undefined for every sequence of the {side} ({UNDEFINED[name]}): the "
            f"{side} values and the distances are null"
            for side in comparison.undefined()
        ]
    homopolymer = partial(homopolymer_bases, min_run=settings.min_homopolymer)
    low_complexity = partial(
        low_complexity_bases, window=settings.dust_window, level=settings.dust_level
    )
    metrics["homopolymer_fraction"] = _side_by_side(
        samples, windows, partial(pooled_fraction, alphabet=alphabet, count=homopolymer)
    )
    metrics["low_complexity_fraction"] = _side_by_side(
        samples, windows, partial(pooled_fraction, alphabet=alphabet, count=low_complexity)
    )
    metrics["duplicate_rate"] = _side_by_side(samples, windows, duplicate_rate)
    metrics["pairwise_kmer_distance"] = _side_by_side(
        samples, windows, partial(pairwise_kmer_distance, alphabet=alphabet, k=settings.diversity_k)
    )
    if train is not None:
        stage(f"nearest training stretches (an index of {counted(len(train), 'training record')})")
        index = TrainingIndex(
            [t.upper() for t in train],
            alphabet,
            seed_k=settings.seed_k,
            seed_stride=settings.seed_stride,
        )
        neighbours = nearest_neighbours(samples, index)
        metrics["train"] = {**_set_summary(train, alphabet), "records": len(train)}
        metrics["memorisation"] = Memorisation.of(neighbours, settings.identity_threshold).to_dict()
    stage(f"discriminator AUROC ({settings.folds} folds)")
    metrics["discriminator_auroc"] = metrics["discriminator"] = None
    try:
        discriminator = discriminator_auroc(
            samples, windows, alphabet, settings.discriminator_k, settings.folds, settings.seed
        )
    except TooFewGroupsError as err:
        metrics["warnings"].append(
            f"no discriminator AUROC: {err}; such sequences are near-copies of one another "
            "(pairwise_kmer_distance and duplicate_rate say how close)"
        )
    else:
        metrics["discriminator_auroc"] = discriminator.auroc
        metrics["discriminator"] = discriminator.to_dict()
    if min(lengths) != max(lengths):
        metrics["warnings"].append(
            f"the samples differ in length ({min(lengths)}-{max(lengths)} bp) and the reference "
            f"is cut into windows of {settings.window or int(np.median(lengths))} bp (their "
            "median, or the window setting): per-sequence numbers (GC, CpG o/e, the "
            "discriminator) compare sequences of other lengths; evaluate samples of one length "
            "at a time"
        )
    if len(samples) < MIN_SAMPLES_FOR_AUROC:
        metrics["warnings"].append(
            f"only {len(samples)} samples: with fewer than {MIN_SAMPLES_FOR_AUROC} the "
            "discriminator AUROC varies widely from fold to fold, even for real DNA; draw "
            f"{MIN_SAMPLES_FOR_AUROC} or more before reading it"
        )
    if ar_checkpoint is not None:
        from genodiff.metrics.likelihood import ar_perplexity

        stage(f"generative perplexity under {ar_checkpoint}")
        metrics["generative_perplexity"] = ar_perplexity(
            samples, windows, ar_checkpoint, alphabet, device, progress=progress
        )
    metrics["settings"] = asdict(settings)
    return SampleQuality(metrics, samples, windows, alphabet)


def _silent(text: str) -> None:
    """A stage note nobody hears."""


def evaluate_sample_files(
    samples: str | os.PathLike | Sequence[str],
    reference: str | os.PathLike | Sequence[str],
    train: str | os.PathLike | Sequence[str] | None = None,
    settings: QualitySettings | None = None,
    ar_checkpoint: str | os.PathLike | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    alphabet: str | None = None,
) -> SampleQuality:
    """``evaluate_samples`` on FASTA files (see ``genodiff.metrics.sequences.read_sequences``)
    or sequences held in memory (each of ``samples``, ``reference`` and ``train`` either), of
    ``alphabet`` (default: the files' domain's, ``genodiff.sample_files.sample_alphabet``);
    each file's path is recorded in the metrics."""
    from genodiff.sample_files import check_sample_file, sample_alphabet

    inputs = {"samples": samples, "reference": reference, "train": train}
    files = {key: value for key, value in inputs.items() if isinstance(value, str | os.PathLike)}
    for key, path in files.items():  # each named as what it is, before any is read
        check_sample_file(path, INPUT_NAMES[key], key)
    if alphabet is None:
        alphabet = sample_alphabet(*files.values())
    if ar_checkpoint is not None:  # a bad device fails now, not after the other metrics
        from genodiff.devices import resolve_device

        resolve_device(device)
    read = {
        key: read_sequences(value, alphabet) if key in files else value
        for key, value in inputs.items()
    }
    quality = evaluate_samples(
        read["samples"],
        read["reference"],
        alphabet,
        read["train"],
        settings,
        ar_checkpoint,
        device,
        progress,
    )
    for key, path in files.items():
        quality.metrics[key]["file"] = str(path)
    return quality
