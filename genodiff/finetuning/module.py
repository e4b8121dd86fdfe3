"""The Lightning fine-tuning module: cross-entropy on a SequenceClassifier, accuracy metrics."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics.classification import MulticlassAccuracy

from genodiff.finetuning.classifier import SequenceClassifier
from genodiff.finetuning.config import FinetuneOptimConfig
from genodiff.finetuning.trained import RECORD_KEY
from genodiff.tokenizers import CHECKPOINT_KEY, tokenizer_record
from genodiff.training.optim import adamw_with_cosine, regroup_earlier_optimizer_state
from genodiff.training.random_state import RandomStateInCheckpoints


class ClassifierModule(RandomStateInCheckpoints):
    """Trains ``classifier`` with cross-entropy; logs ``train/loss``, ``val/acc``, ``test/acc``.

    With ``rc_aug`` each training sequence is replaced by its reverse complement with
    probability 1/2 (torch's global RNG, seeded per fold; its state is in every checkpoint, so a
    resumed fold draws what an uninterrupted one would). Test predictions are kept in
    ``test_predictions`` (N,) and ``test_labels`` (N,) for scikit-learn metrics, and the mean
    test cross-entropy in ``test_loss``.

    ``class_weights`` (C,) weight each class's cross-entropy in training (None: equal weights);
    validation and test losses are unweighted.

    ``record`` (``genodiff.finetuning.trained.classifier_record``: class names, task, sequence
    length, backbone config, pooling) is saved in every checkpoint's hyperparameters, and the
    classifier's tokenizer under ``genodiff.tokenizers.CHECKPOINT_KEY`` as in every training
    checkpoint, so a checkpoint can be loaded back as a classifier on its own
    (``load_finetuned_classifier``).
    """

    def __init__(
        self,
        classifier: SequenceClassifier,
        lr: float,
        optim: FinetuneOptimConfig,
        rc_aug: bool,
        record: dict[str, Any],
        class_weights: Tensor | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters({RECORD_KEY: record}, logger=False)
        self.classifier = classifier
        self.lr, self.optim_cfg, self.rc_aug = lr, optim, rc_aug
        self.register_buffer("class_weights", class_weights, persistent=False)
        num_classes = classifier.score.out_features
        # A run trains in one process (several processes take whole runs, not shares of one:
        # genodiff.parallel), so its accuracies never gather other processes' counts.
        self.val_acc = MulticlassAccuracy(num_classes, average="micro", sync_on_compute=False)
        self.test_acc = MulticlassAccuracy(num_classes, average="micro", sync_on_compute=False)
        self._predictions: list[Tensor] = []
        self._labels: list[Tensor] = []
        self._loss_sum = 0.0
        self.test_predictions = self.test_labels = torch.empty(0, dtype=torch.long)
        self.test_loss = float("nan")

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[CHECKPOINT_KEY] = tokenizer_record(self.classifier.tokenizer)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        regroup_earlier_optimizer_state(checkpoint, (self.classifier,))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        ids, labels = batch[0].long(), batch[1]  # (B, L), (B,)
        if self.rc_aug:
            flip = torch.rand(ids.shape[0], device=ids.device) < 0.5  # (B,)
            ids = torch.where(flip[:, None], self.classifier.rc(ids), ids)
        loss = F.cross_entropy(self.classifier(ids), labels, weight=self.class_weights)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self.val_acc.update(self.classifier(batch[0].long()), batch[1])
        self.log("val/acc", self.val_acc, prog_bar=True, on_epoch=True, on_step=False)

    def on_test_epoch_start(self) -> None:
        self._predictions, self._labels, self._loss_sum = [], [], 0.0

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        logits = self.classifier(batch[0].long())  # (B, C)
        self.test_acc.update(logits, batch[1])
        self.log("test/acc", self.test_acc, on_epoch=True, on_step=False)
        self._loss_sum += F.cross_entropy(logits, batch[1], reduction="sum").item()
        self._predictions.append(logits.argmax(-1).cpu())
        self._labels.append(batch[1].cpu())

    def on_test_epoch_end(self) -> None:
        self.test_predictions = torch.cat(self._predictions)
        self.test_labels = torch.cat(self._labels)
        self.test_loss = self._loss_sum / max(len(self.test_labels), 1)

    def configure_optimizers(self) -> dict[str, Any]:
        total = int(self.trainer.estimated_stepping_batches)
        return adamw_with_cosine((self.classifier,), self.lr, self.optim_cfg, total)
