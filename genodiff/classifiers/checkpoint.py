"""Guidance classifier checkpoints: what ``genodiff classifier`` stores beside the weights, and
``load_classifier``, their builder on genodiff's one loader (``genodiff.checkpoints.load``).

A classifier checkpoint is a Lightning .ckpt (written atomically, ``genodiff.checkpoints.io``)
whose ``genodiff_classifier`` entry (``CLASSIFIER_RECORD_KEY``) holds the ``kind`` (noisy |
causal), the ``class_names`` in label-id order, the completed ``model`` section of its
backbone, its ``pooling``, and the ``generator`` it was trained for: its reference and its
objective section (whose forward process drew the noisy inputs). The tokenizer is stored as in
every training checkpoint (``genodiff.tokenizers.CHECKPOINT_KEY``); the weights are the
``classifier.*`` entries of the state dict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from genodiff.checkpoints.io import CLASSIFIER_RECORD_KEY
from genodiff.checkpoints.load import CLASSIFIER, CLASSIFIER_WEIGHTS_PREFIX, open_checkpoint
from genodiff.checkpoints.weights import load_weights
from genodiff.classifiers.guide import ClassifierGuide
from genodiff.classifiers.model import KINDS, build_classifier
from genodiff.errors import InputValueError
from genodiff.guidance import check_noisy_states
from genodiff.randomness.kept import global_random_state_kept


def classifier_record(
    kind: str,
    class_names: list[str],
    model: dict[str, Any],
    pooling: str,
    generator: str | None,
    generator_objective: dict[str, Any] | None,
) -> dict[str, Any]:
    """What a classifier checkpoint stores under ``CLASSIFIER_RECORD_KEY`` (module doc)."""
    return {
        "kind": kind,
        "class_names": list(class_names),
        "model": model,
        "pooling": pooling,
        "generator": generator,
        "generator_objective": generator_objective,
    }


#: The entries of a classifier record that ``load_classifier`` reads, and their types.
RECORD_TYPES = {"kind": str, "class_names": list, "model": dict, "pooling": str}


def check_record(record: dict[str, Any], source: str | Path) -> None:
    """One-line InputValueError naming the entries of a classifier record (``classifier_record``)
    that are missing or of the wrong type (an edited or damaged checkpoint): the class names
    must be strings, and a noisy classifier's generator objective must name its objective."""
    bad = [key for key, kind in RECORD_TYPES.items() if not isinstance(record.get(key), kind)]
    names = record.get("class_names")
    if "class_names" not in bad and not (names and all(isinstance(n, str) for n in names)):
        bad.append("class_names")
    objective = record.get("generator_objective")
    named = isinstance(objective, dict) and isinstance(objective.get("name"), str)
    if record.get("kind") == "noisy" and not named:
        bad.append("generator_objective")
    if bad:
        raise InputValueError(
            f"{source}: the classifier record ({CLASSIFIER_RECORD_KEY}) has no valid "
            f"{', '.join(bad)}; the checkpoint was edited or damaged: use the file genodiff "
            "classifier wrote, or train the classifier again"
        )


@global_random_state_kept()  # building the module draws its discarded initial weights
def load_classifier(
    path: str | Path,
    device: str | torch.device = "cpu",
    kind: str | None = None,
    generator_objective: str | None = None,
) -> ClassifierGuide:
    """The guidance classifier a ``genodiff classifier`` checkpoint holds, frozen, on
    ``device`` (the guide moves it to the device of the states a sampler gives it), with the
    tokenizer it stores. ``path`` is anything
    ``genodiff.checkpoints.load.open_checkpoint`` takes: a .ckpt, a run's output folder or its
    checkpoints folder (``last.ckpt``), a Hub id. ``kind`` (noisy | causal), when given, is
    required of it. ``generator_objective``: the objective name of the generator it is to
    guide; a noisy classifier trained on another kind of noisy states
    (``Objective.noisy_states``: masked, uniform) is refused. One-line InputValueError /
    InputFileNotFoundError for a missing, damaged, unsafe or other kind of checkpoint, and for
    weights that do not fit or are not finite."""
    stored = open_checkpoint(path, CLASSIFIER)
    record, source = stored.record, stored.source
    check_record(record, source)
    if record["kind"] not in KINDS or (kind is not None and record["kind"] != kind):
        wanted = kind if kind is not None else " or ".join(KINDS)
        raise InputValueError(
            f"{source} is a {record['kind']} classifier; {wanted} is needed here (train one "
            f"with genodiff classifier CONFIG kind={kind or 'noisy'})"
        )
    if record["kind"] == "noisy" and generator_objective is not None:
        check_noisy_states(record["generator_objective"]["name"], generator_objective, source)
    classifier = build_classifier(
        record["model"],
        len(record["class_names"]),
        record["kind"],
        stored.tokenizer,
        record["pooling"],
    )
    load_weights(classifier, stored.weights(CLASSIFIER_WEIGHTS_PREFIX), source)
    return ClassifierGuide(
        classifier.to(device),
        stored.tokenizer,
        record["class_names"],
        record["generator_objective"],
        source=str(source),
        trained_length=trained_length(stored.content),
    )


def trained_length(content: dict[str, Any]) -> int | None:
    """The window length (``data.max_length``) a classifier checkpoint's run config trained
    on; None when it records none."""
    config: Any = content
    for key in ("hyper_parameters", "config", "data"):
        config = config.get(key) if isinstance(config, dict) else None
    length = config.get("max_length") if isinstance(config, dict) else None
    return length if isinstance(length, int) and not isinstance(length, bool) else None
