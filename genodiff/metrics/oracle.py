"""Did class-guided generation work? An oracle's verdict beside the suite, class by class.

An oracle is a classifier that never saw the generator's training data: any checkpoint of
``genodiff finetune`` (``genodiff.finetuning.trained``), trained for example on the test split of
the generator's labelled data (``genodiff data labelled-split``). Every sample was drawn for a
class (the ``label=NAME`` word of its FASTA header, or one ``--label`` for all); the oracle
classifies every sample (in batches), and

- ``oracle_accuracy`` is the share of samples the oracle puts in the class they were drawn for;
- ``oracle_macro_f1`` is the mean over the classes samples were drawn for of
  F1 = 2 TP / (2 TP + FP + FN) (a sample of another class called this one is a false positive);
- ``oracle_confusion`` counts samples by (class drawn for, the oracle's call), over all the
  oracle's classes.

The samples of each class are then scored by the whole quality suite (``suite.evaluate_samples``)
against real sequences of that class; ``kmer_js``, ``kmer_js_real_vs_real`` and its spread
``kmer_js_real_vs_real_sd`` ({class: {"3", "6"}}), ``discriminator_auroc`` ({class: AUROC}),
``gc_content``, ``cpg_oe`` (means), ``duplicate_rate`` and ``pairwise_kmer_distance``
({class: {"samples", "reference"}}) gather its headline numbers, and ``per_class`` holds each
class's full metrics. The oracle says whether samples are of their class; the discriminator and
the composition say whether they look like real DNA of it, which strong guidance trades away
(``report.oracle_markdown`` shows them side by side).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from genodiff.errors import InputValueError
from genodiff.metrics.sequences import read_sequences
from genodiff.metrics.suite import QualitySettings, SampleQuality, evaluate_samples
from genodiff.progress import Progress

ORACLE_KS = ("3", "6")  # the k-mer JS divergences reported per class


class Oracle(Protocol):
    """A classifier of DNA sequences into ``classes`` (``FinetunedClassifier``)."""

    classes: list[str]

    def predict(self, sequences: Sequence[str]) -> np.ndarray:
        """Class ids (N,) into ``classes``."""


@dataclass
class OracleQuality:
    """The metrics (``metrics.json``) and every class's suite result (for its report)."""

    metrics: dict[str, Any]
    per_class: dict[str, SampleQuality]


def oracle_scores(asked: np.ndarray, called: np.ndarray, classes: Sequence[str]) -> dict[str, Any]:
    """Accuracy, macro-F1 (over the classes in ``asked``) and confusion counts of the oracle's
    calls ``called`` (N,) against the classes ``asked`` (N,) the samples were drawn for."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    asked_classes = sorted(set(asked.tolist()))
    confusion = confusion_matrix(asked, called, labels=list(range(len(classes))))
    return {
        "oracle_accuracy": float(accuracy_score(asked, called)),
        "oracle_macro_f1": float(
            f1_score(asked, called, labels=asked_classes, average="macro", zero_division=0)
        ),
        "oracle_confusion": {
            "classes": list(classes),
            "counts": confusion.tolist(),  # rows: the class asked for; columns: the oracle's call
        },
    }


def check_class_name(name: str, classes: Sequence[str], what: str, parameter: str) -> None:
    """InputValueError naming the oracle's classes when ``name`` (given as ``what``, by the
    argument ``parameter``) is not one."""
    if name not in classes:
        raise InputValueError(
            f"{what} names class {name!r}, which the oracle does not know; its classes: "
            f"{', '.join(classes)}",
            parameter=parameter,
        )


def sample_classes(
    labels: Sequence[str | None], default: str | None, classes: Sequence[str], source: str
) -> np.ndarray:
    """Class ids (N,) of the samples: each one's own label (its header's ``label=NAME``) where
    it has one, else ``default`` (the ``label`` argument)."""
    ids = []
    for number, label in enumerate(labels, start=1):
        name = label if label is not None else default
        if name is None:
            raise InputValueError(
                f"{source}: sample {number} names no class (no label=NAME in its header); "
                f"give a label for it, one of: {', '.join(classes)}",
                parameter="label",
            )
        if label is not None:
            check_class_name(name, classes, f"{source}, sample {number},", "samples")
        else:
            check_class_name(name, classes, "label", "label")
        ids.append(classes.index(name))
    return np.array(ids, dtype=np.int64)


def parse_references(values: Sequence[str], label: str | None) -> dict[str, Path]:
    """``references`` (the CLI's ``--reference`` values) as {class: FASTA}: ``NAME=FASTA``
    names its class, a plain FASTA is the reference of the ``label`` class (at most one)."""
    references: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or Path(value).exists():
            if label is None:
                raise InputValueError(
                    f"reference {value}: a plain FASTA is the reference of the label class; "
                    "give a label (the class name), or name the class: NAME=FASTA",
                    parameter=("label", "reference"),
                )
            name, path = label, value
        if name in references:
            raise InputValueError(
                f"two reference files for class {name!r}; give one", parameter="reference"
            )
        references[name] = Path(path)
    return references


def evaluate_with_oracle(
    samples: Sequence[str],
    asked: np.ndarray,
    references: Mapping[str, Sequence[str]],
    oracle: Oracle,
    alphabet: str,
    settings: QualitySettings | None = None,
    train: Sequence[str] | None = None,
    ar_checkpoint: str | os.PathLike | None = None,
    device: str | None = None,
    progress: Progress | None = None,
) -> OracleQuality:
    """The oracle's scores of ``samples`` drawn for the classes ``asked`` (N,) (ids into
    ``oracle.classes``), and the suite for each class's samples against ``references[class]``
    (sequences; all of ``alphabet``). Every class asked for needs a reference; references of
    classes no sample was
    drawn for are left out, with a warning."""
    if settings is not None and settings.kmax < int(ORACLE_KS[-1]):
        raise InputValueError(f"the oracle report needs kmax >= 6, got {settings.kmax}")
    classes = oracle.classes
    drawn = [classes[i] for i in sorted(set(asked.tolist()))]
    missing = [name for name in drawn if name not in references]
    if missing:
        raise InputValueError(
            f"no reference for class(es) {', '.join(missing)}: give a reference NAME=FASTA "
            "for each class samples were drawn for",
            parameter="reference",
        )
    if progress is not None:
        progress.note(f"the oracle on {len(samples)} samples")
    called = oracle.predict(samples)  # (N,)
    metrics: dict[str, Any] = {
        "samples": {"sequences": len(samples), "per_class": {}},
        "oracle": {"classes": list(classes)},
        **oracle_scores(asked, called, classes),
        "kmer_js": {},
        "kmer_js_real_vs_real": {},
        "kmer_js_real_vs_real_sd": {},
        "discriminator_auroc": {},
        "gc_content": {},
        "cpg_oe": {},
        "duplicate_rate": {},
        "pairwise_kmer_distance": {},
        "per_class": {},
        "warnings": [
            f"class {name}: a reference was given but no sample was drawn for it"
            for name in references
            if name not in drawn
        ],
    }
    per_class = {}
    for name in drawn:
        mine = asked == classes.index(name)  # (N,)
        class_samples = [s for s, keep in zip(samples, mine, strict=True) if keep]
        if progress is not None:
            progress.note(f"class {name}: the quality suite on {len(class_samples)} samples")
        try:
            quality = evaluate_samples(
                class_samples,
                references[name],
                alphabet,
                train,
                settings,
                ar_checkpoint,
                device,
                progress,
            )
        except InputValueError as err:
            raise InputValueError(f"class {name}: {err}", parameter=err.parameter) from None
        per_class[name] = quality
        m = quality.metrics
        metrics["samples"]["per_class"][name] = {
            "sequences": len(class_samples),
            "oracle_accuracy": float(np.mean(called[mine] == classes.index(name))),
        }
        for key in ("kmer_js", "kmer_js_real_vs_real", "kmer_js_real_vs_real_sd"):
            metrics[key][name] = {k: m[key][k] for k in ORACLE_KS}
        metrics["discriminator_auroc"][name] = m["discriminator_auroc"]
        for key in ("gc_content", "cpg_oe"):
            means = m[key]
            metrics[key][name] = {
                "samples": means["samples_mean"],
                "reference": means["reference_mean"],
            }
        for key in ("duplicate_rate", "pairwise_kmer_distance"):
            metrics[key][name] = m[key]
        metrics["per_class"][name] = m
        metrics["warnings"] += [f"class {name}: {warning}" for warning in m["warnings"]]
    return OracleQuality(metrics, per_class)


def _oracle_classifier(oracle: str | os.PathLike, device: str | None) -> Any:
    """The fine-tuned classifier ``oracle`` names, on ``device``; a checkpoint of another kind
    (a ``genodiff train`` or ``genodiff classifier`` one) is one InputValueError naming
    ``oracle``, what it needs and what it got."""
    from genodiff.checkpoints.load import KINDS, WrongKindError
    from genodiff.devices import resolve_device
    from genodiff.finetuning.trained import load_finetuned_classifier

    try:
        return load_finetuned_classifier(oracle, resolve_device(device))
    except WrongKindError as err:
        raise InputValueError(
            f"oracle={oracle} is {KINDS[err.found].what}, and the oracle must be "
            f"{KINDS[err.expected].what}: give a checkpoint a genodiff finetune run wrote (a "
            "fold's checkpoints/best-*.ckpt under its output_dir/runs/, kept with "
            "keep_checkpoints=true)",
            parameter="oracle",
        ) from None


def evaluate_files_with_oracle(
    samples: str | os.PathLike,
    references: Sequence[str],
    oracle: str | os.PathLike,
    label: str | None = None,
    settings: QualitySettings | None = None,
    train: str | os.PathLike | None = None,
    ar_checkpoint: str | os.PathLike | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    alphabet: str | None = None,
) -> OracleQuality:
    """``evaluate_with_oracle`` on files: ``samples`` (FASTA whose headers may name each
    sample's class), ``references`` (``NAME=FASTA`` or FASTA, see ``parse_references``) and a
    ``genodiff finetune`` checkpoint ``oracle``, all of ``alphabet`` (default: their domain's,
    ``genodiff.sample_files.sample_alphabet``). Every input is checked before any metric."""
    from genodiff.metrics.suite import INPUT_NAMES
    from genodiff.sample_files import check_sample_file, read_sample_labels, sample_alphabet

    reference_files = parse_references(references, label)
    check_sample_file(samples, INPUT_NAMES["samples"], "samples")
    for name, path in reference_files.items():  # each named as what it is, before any is read
        check_sample_file(path, f"reference of class {name}", "reference")
    if train is not None:
        check_sample_file(train, INPUT_NAMES["train"], "train")
    if alphabet is None:
        alphabet = sample_alphabet(samples, *reference_files.values(), train)
    classifier = _oracle_classifier(oracle, device)
    classes = classifier.classes
    if label is not None:
        check_class_name(label, classes, "label", "label")
    for name, path in reference_files.items():
        check_class_name(name, classes, f"reference {name}={path}", "reference")
    sequences = read_sequences(samples, alphabet)
    asked = sample_classes(read_sample_labels(samples), label, classes, str(samples))
    quality = evaluate_with_oracle(
        sequences,
        asked,
        {name: read_sequences(path, alphabet) for name, path in reference_files.items()},
        classifier,
        alphabet,
        settings,
        read_sequences(train, alphabet) if train is not None else None,
        ar_checkpoint,
        device,
        progress,
    )
    m = quality.metrics
    m["samples"]["file"] = str(samples)
    m["oracle"].update(
        checkpoint=classifier.source, task=classifier.task, max_length=classifier.max_length
    )
    m["reference_files"] = {name: str(path) for name, path in reference_files.items()}
    for name, class_quality in quality.per_class.items():
        class_quality.metrics["samples"]["file"] = f"{samples} (class {name})"
        class_quality.metrics["reference"]["file"] = str(reference_files[name])
    return quality
