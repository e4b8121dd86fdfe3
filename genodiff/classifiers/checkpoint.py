"""Guidance classifier checkpoints: what ``genodiff classifier`` stores beside the weights, and
``load_classifier``.

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

from genodiff import registry
from genodiff.checkpoints.io import CLASSIFIER_RECORD_KEY, read_checkpoint
from genodiff.checkpoints.load import check_finite_weights, checkpoint_file
from genodiff.classifiers.guide import ClassifierGuide
from genodiff.classifiers.model import KINDS, build_classifier
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.tokenizers import tokenizer_from_checkpoint

#: The state-dict prefix of the classifier's weights (the training module's attribute).
WEIGHTS_PREFIX = "classifier."


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


def load_classifier(
    path: str | Path,
    device: str | torch.device = "cpu",
    kind: str | None = None,
    generator_objective: str | None = None,
) -> ClassifierGuide:
    """The guidance classifier a ``genodiff classifier`` checkpoint (a .ckpt, or a run's
    output folder / its checkpoints folder: ``last.ckpt``) holds, frozen, on ``device``.
    ``kind`` (noisy | causal), when given, is required of it. ``generator_objective``: the
    objective name of the generator it is to guide; a noisy classifier trained on another
    kind of noisy states (``Objective.noisy_states``: masked, uniform) is refused. One-line
    InputValueError / InputFileNotFoundError for a missing, damaged or other kind of
    checkpoint."""
    source = Path(path)
    if not source.exists():
        raise InputFileNotFoundError(f"classifier checkpoint not found: {source}")
    if source.is_dir() and (source / "checkpoints").is_dir():
        source = source / "checkpoints"
    source = checkpoint_file(source)
    checkpoint = read_checkpoint(source)  # one clear error for a damaged file
    record = checkpoint.get(CLASSIFIER_RECORD_KEY)
    if not isinstance(record, dict):
        raise InputValueError(
            f"{source} is not a guidance classifier (a genodiff train checkpoint?); train "
            "one with genodiff classifier CONFIG"
        )
    if record["kind"] not in KINDS or (kind is not None and record["kind"] != kind):
        wanted = kind if kind is not None else " or ".join(KINDS)
        raise InputValueError(
            f"{source} is a {record['kind']} classifier; {wanted} is needed here (train one "
            f"with genodiff classifier CONFIG kind={kind or 'noisy'})"
        )
    if record["kind"] == "noisy" and generator_objective is not None:
        check_noisy_states(record["generator_objective"]["name"], generator_objective, source)
    tokenizer = tokenizer_from_checkpoint(checkpoint)
    classifier = build_classifier(
        record["model"],
        len(record["class_names"]),
        record["kind"],
        tokenizer,
        record["pooling"],
    )
    weights = {
        key.removeprefix(WEIGHTS_PREFIX): value
        for key, value in checkpoint["state_dict"].items()
        if key.startswith(WEIGHTS_PREFIX)
    }
    try:
        classifier.load_state_dict(weights)
    except RuntimeError as err:
        raise InputValueError(
            f"{source}: its weights do not fit its recorded model ({str(err).splitlines()[0]})"
        ) from None
    check_finite_weights(classifier, source)
    return ClassifierGuide(
        classifier.to(device),
        tokenizer,
        record["class_names"],
        record["generator_objective"],
        source=str(source),
    )


def check_noisy_states(trained_for: str, generator_objective: str, source: Path) -> None:
    """InputValueError when a noisy classifier trained for a ``trained_for`` generator reads
    other noisy states than a ``generator_objective`` generator makes (masked vs uniform). A
    generator without noisy states (AR) is left to the guide, which names the kind it needs."""
    trained_states = registry.get("objective", trained_for).noisy_states
    states = registry.get("objective", generator_objective).noisy_states
    if states is not None and states != trained_states:
        raise InputValueError(
            f"{source} learnt p(y | z_t) on the {trained_states} states of a {trained_for} "
            f"generator, and this {generator_objective} generator's are {states}; train one "
            "for it (genodiff classifier CONFIG generator=CKPT)"
        )
