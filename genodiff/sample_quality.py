"""Are generated sequences any good? ``evaluate_samples``, what ``genodiff evaluate-samples``
runs: the sequence metrics of ``genodiff.metrics`` on samples against real sequences, written
as a report (metrics.json, metrics.md, plots).

The letters the metrics count come from the samples' domain (``Domain.alphabet``: DNA's
A/C/G/T), read from the ``Samples``' tokenizer or from the files' format
(``genodiff.sample_files.sample_alphabet``); a domain that declares no alphabet has no such
metrics, and is refused. Its own module, so that loading a model imports none of the metrics'
libraries (scikit-learn, matplotlib).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from genodiff.domains import domain_of
from genodiff.errors import InputValueError, refuse_sequence_as_file_name, require_flag
from genodiff.metrics import (
    OracleQuality,
    QualitySettings,
    SampleQuality,
    check_report_folder,
    evaluate_files_with_oracle,
    evaluate_sample_files,
    write_oracle_report,
    write_report,
)
from genodiff.pipeline import Samples
from genodiff.progress import Progress

PathLike = str | os.PathLike


def evaluate_samples(
    samples: PathLike | Sequence[str],
    reference: PathLike | Sequence[str] | Mapping[str, PathLike],
    *,
    out: PathLike | None = None,
    oracle: PathLike | None = None,
    label: str | None = None,
    train: PathLike | Sequence[str] | None = None,
    ar_checkpoint: PathLike | None = None,
    settings: QualitySettings | None = None,
    alphabet: str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    overwrite: bool = False,
) -> SampleQuality | OracleQuality:
    """Are generated sequences any good? What ``genodiff evaluate-samples`` reports
    (metrics.json, metrics.md and plots, written to ``out``), returned as its quality object.

    Without ``oracle``: every metric of ``samples`` (a file of their domain, DNA's FASTA, or
    the sequences: ``Samples`` or any list of strings) against ``reference`` (real sequences,
    likewise), the memorisation test against ``train`` (likewise), generative perplexity under
    ``ar_checkpoint``; ``out`` defaults to ``<samples>_quality/`` beside a samples file. With
    ``oracle`` (a ``genodiff finetune`` checkpoint) and ``samples`` a FASTA: the oracle's
    verdict (each sample of the class its header names, else ``label``) and the metrics per
    class against ``reference``, a mapping {class: FASTA} (or ``NAME=FASTA`` strings).
    A str is a file name: one of letters alone that names no file (a sequence) is refused,
    saying to give sequences as a list. ``alphabet``: the letters the samples are made of
    (default: their domain's, from the ``Samples``' tokenizer or the files' format). A report
    already in ``out`` is refused unless ``overwrite``."""
    overwrite = require_flag(overwrite, "overwrite")
    for parameter, value in (("samples", samples), ("reference", reference), ("train", train)):
        refuse_sequence_as_file_name(value, parameter)
    on_disk = isinstance(samples, str | os.PathLike)
    if out is None and not on_disk:
        raise InputValueError(
            "give out (a report folder) for samples held in memory", parameter="out"
        )
    folder = Path(out).expanduser() if out is not None else report_folder(Path(samples))
    check_report_folder(folder, overwrite)  # before the metrics are computed
    if alphabet is None and isinstance(samples, Samples):
        alphabet = _domain_alphabet(samples)  # else: the files' domain's
    options = {"ar_checkpoint": ar_checkpoint, "device": device, "settings": settings}
    options["progress"] = progress
    if oracle is not None:
        if not on_disk:
            raise InputValueError(
                "an oracle reads each sample's class from its FASTA header: save the samples "
                "(Samples.save) and give the file",
                parameter="samples",
            )
        references = reference
        if isinstance(reference, Mapping):
            references = [f"{name}={path}" for name, path in reference.items()]
        elif isinstance(reference, str | os.PathLike):
            references = [str(reference)]
        quality = evaluate_files_with_oracle(
            samples, list(references), oracle, label, train=train, alphabet=alphabet, **options
        )
        write_oracle_report(quality, folder)
        return quality
    if label is not None:
        raise InputValueError(
            "label names the samples' class for an oracle; give the oracle",
            parameter=("label", "oracle"),
        )
    if isinstance(reference, Mapping) or (
        isinstance(reference, str | os.PathLike)
        and "=" in str(reference)
        and not Path(reference).exists()
    ):
        raise InputValueError(
            f"reference {reference}: references per class (NAME=FASTA) are for an oracle; "
            "give one reference FASTA (or sequences), or the oracle",
            parameter="reference",
        )
    quality = evaluate_sample_files(samples, reference, train, alphabet=alphabet, **options)
    write_report(quality, folder)
    return quality


def report_folder(samples: Path) -> Path:
    """``<name>_quality/`` beside the samples file ``<name>.fa`` (or ``<name>.fa.gz``): only
    the format's suffix and ``.gz`` are dropped, so ``samples_t0.9.fa`` and ``samples_t1.1.fa``
    get folders of their own."""
    name = samples.name[:-3] if samples.name.lower().endswith(".gz") else samples.name
    return samples.with_name(Path(name).stem + "_quality")


def _domain_alphabet(samples: Samples) -> str:
    """The letters ``samples``' domain declares; InputValueError for a domain with none."""
    domain = domain_of(samples.tokenizer)
    if domain.alphabet is None:
        raise InputValueError(
            f"{domain.name} samples are not strings of a few letters (the {domain.name} domain "
            "declares no alphabet): the sequence metrics do not apply to them",
            parameter="samples",
        )
    return domain.alphabet
