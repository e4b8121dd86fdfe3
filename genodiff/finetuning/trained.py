"""A fine-tuned classifier as its checkpoint stores it, loaded back to classify sequences.

Every checkpoint ``genodiff finetune`` writes (``<output_dir>/runs/<task>/<sweep>/fold<k>/
checkpoints/best-epoch<E>.ckpt``, kept when ``keep_checkpoints`` is true, the default) holds,
in its hyperparameters under ``finetuned_classifier``, what it takes to rebuild the classifier
without the run's config: the class names in label-id order, the task, the sequence length it
reads (``max_length``), the backbone's config and the head's pooling and reverse-complement
settings; and the tokenizer its inputs were encoded with, as every training checkpoint
(``genodiff.tokenizers.CHECKPOINT_KEY``). ``load_finetuned_classifier`` reads it back
(``genodiff evaluate-samples --oracle``) through genodiff's one loader
(``genodiff.checkpoints.load``). Checkpoints written before the record existed are refused
with a message saying so; those written before the tokenizer was stored read with the default
tokenizer (``genodiff.tokenizers.tokenizer_from_checkpoint``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from genodiff import backbones
from genodiff.backbones.build import CONFIG_ATTR
from genodiff.checkpoints.io import FINETUNED_RECORD_KEY
from genodiff.checkpoints.load import (
    CLASSIFIER_WEIGHTS_PREFIX,
    FINETUNED,
    UnknownCheckpointError,
    open_checkpoint,
)
from genodiff.checkpoints.weights import load_weights
from genodiff.data.benchmarks import left_pad
from genodiff.errors import InputValueError, sequence_list
from genodiff.finetuning.classifier import SequenceClassifier
from genodiff.randomness.kept import global_random_state_kept

RECORD_KEY = FINETUNED_RECORD_KEY
PREDICT_BATCH = 64


def classifier_record(
    classifier: SequenceClassifier, classes: Sequence[str], max_length: int, task: str
) -> dict[str, Any]:
    """What a checkpoint stores to rebuild ``classifier`` (see the module doc); plain
    containers only, so checkpoints load with ``weights_only``."""
    return {
        "classes": list(classes),
        "task": task,
        "max_length": int(max_length),
        "backbone": json.loads(json.dumps(getattr(classifier.backbone, CONFIG_ATTR))),
        "pooling": classifier.pooling,
        "conjoin_train": classifier.conjoin_train,
        "conjoin_eval": classifier.conjoin_eval,
    }


@dataclass
class FinetunedClassifier:
    """A ``SequenceClassifier`` in eval mode (holding the tokenizer it reads with) with the
    class names and length it was trained with."""

    classifier: SequenceClassifier
    classes: list[str]
    max_length: int
    task: str
    source: str

    def predict(self, sequences: Sequence[str], batch_size: int = PREDICT_BATCH) -> np.ndarray:
        """Class ids (N,) of ``sequences``, read as ``genodiff finetune`` reads a task: encoded
        with the classifier's tokenizer, the first ``max_length`` tokens, left-padded with
        [PAD]; batches of ``batch_size``. ``sequences``: a list of str, not one str."""
        sequences = sequence_list(sequences)
        tokenizer = self.classifier.tokenizer
        ids = left_pad(
            [np.asarray(tokenizer.encode(s)[: self.max_length]) for s in sequences],
            self.max_length,
            tokenizer.pad_id,
            tokenizer.vocab_size,
        )  # (N, max_length)
        device = next(self.classifier.parameters()).device
        predicted = []
        with torch.no_grad():
            for start in range(0, len(ids), batch_size):
                batch = ids[start : start + batch_size].long().to(device)  # (b, max_length)
                logits = self.classifier(batch)  # (b, C)
                predicted.append(logits.argmax(-1).cpu())
        return torch.cat(predicted).numpy() if predicted else np.empty(0, dtype=np.int64)


@global_random_state_kept()  # building the module draws its discarded initial weights
def load_finetuned_classifier(
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> FinetunedClassifier:
    """The classifier a ``genodiff finetune`` checkpoint holds, with the tokenizer it stores,
    on ``device``, in eval mode. ``path`` is anything
    ``genodiff.checkpoints.load.open_checkpoint`` takes (a .ckpt, a finished fold's checkpoints
    folder: its selected checkpoint, the only one left there; a Hub id). One ValueError naming
    the file for a damaged or unsafe file, for any other kind of checkpoint (saying what it
    is), for a checkpoint from before the record was stored, and for weights that do not fit
    or are not finite."""
    try:
        stored = open_checkpoint(path, FINETUNED)
    except UnknownCheckpointError as err:
        if _written_before_records(err.content):
            raise InputValueError(
                f"{err.source} is a genodiff finetune checkpoint written before checkpoints "
                "stored their class names and architecture; run genodiff finetune again "
                "(keep_checkpoints=true) to get one that can be loaded on its own"
            ) from None
        raise
    record = stored.record
    classifier = SequenceClassifier(
        backbones.build(**record["backbone"]),
        len(record["classes"]),
        stored.tokenizer,
        record["pooling"],
        record["conjoin_train"],
        record["conjoin_eval"],
    )
    load_weights(classifier, stored.weights(CLASSIFIER_WEIGHTS_PREFIX), stored.source)
    return FinetunedClassifier(
        classifier.to(device).eval(),
        list(record["classes"]),
        int(record["max_length"]),
        str(record["task"]),
        str(stored.source),
    )


def _written_before_records(content: Any) -> bool:
    """Whether a checkpoint of no known kind is a fine-tuning one of the format before the
    record: the weights of a classification head, without the record."""
    state = content.get("state_dict") if isinstance(content, dict) else None
    return isinstance(state, dict) and any(
        k.startswith(f"{CLASSIFIER_WEIGHTS_PREFIX}score.") for k in state
    )
