"""The Lightning module that trains a guidance classifier (``genodiff classifier``).

Noisy kind: cross-entropy of log p(y | z_t) on z_t drawn from the generator's forward process,
masked or uniform (``genodiff.classifiers.noise``; the training noise has a generator of its
own, seeded from the run's seed). Causal kind: cross-entropy of log p(y | x_<=i) at every
non-[PAD] position i of clean sequences, averaged. Validation logs accuracy:

- noisy: ``val/acc_clean`` (t = 0) and ``val/acc_t<t>`` at each of ``val_times`` (the same
  noise draws at every validation), and ``val/acc``, their mean (the checkpoint monitor);
- causal: ``val/acc`` at the last position (the whole sequence read) and ``val/acc_half``
  at the middle one.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics.classification import MulticlassAccuracy

from genodiff.checkpoints.io import CLASSIFIER_RECORD_KEY
from genodiff.classifiers.model import GuidanceClassifier
from genodiff.classifiers.noise import NoisyStates, inputs_at_time
from genodiff.config import OptimConfig
from genodiff.data.loaders import batch_shard
from genodiff.tokenizers import CHECKPOINT_KEY, Tokenizer, tokenizer_record
from genodiff.training.optim import adamw_with_cosine
from genodiff.training.random_state import RandomStateInCheckpoints, seeded_generator


def time_tag(t: float) -> str:
    """The metric suffix of validation time ``t``: ``t0.25``."""
    return f"t{t:g}"


class ClassifierTrainingModule(RandomStateInCheckpoints):
    """Trains ``classifier`` (see the module doc); ``process`` is the generator's forward
    process (masked or uniform; None for the causal kind). Checkpoints carry ``record``
    (``checkpoint.classifier_record``) and the tokenizer."""

    def __init__(
        self,
        classifier: GuidanceClassifier,
        tokenizer: Tokenizer,
        record: dict[str, Any],
        config: dict[str, Any],
        process: NoisyStates | None,
    ) -> None:
        super().__init__()
        self.classifier = classifier
        self.tokenizer = tokenizer
        self.record = record
        self.process = process
        self.save_hyperparameters({"config": config})
        self.optim_cfg = OptimConfig(**config.get("optim", {}))
        self.val_times = [0.0, *config.get("val_times", [])] if process is not None else []
        self._seed = int(config.get("seed", 0))
        num_classes = len(record["class_names"])
        #: The validation accuracies' metric names, and their metrics (in that order).
        self.metric_names = (
            ["val/acc_clean", *(f"val/acc_{time_tag(t)}" for t in self.val_times[1:])]
            if process is not None
            else ["val/acc", "val/acc_half"]
        )
        self.accuracies = torch.nn.ModuleList(
            MulticlassAccuracy(num_classes, average="micro") for _ in self.metric_names
        )
        self.training_noise: torch.Generator | None = None
        self.heldout_noise: torch.Generator | None = None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[CLASSIFIER_RECORD_KEY] = self.record
        checkpoint[CHECKPOINT_KEY] = tokenizer_record(self.tokenizer)

    def on_train_start(self) -> None:
        self.training_noise = seeded_generator(self._seed, "classifier noise", self.device)
        super().on_train_start()

    def on_validation_epoch_start(self) -> None:
        # the same noise at every validation: accuracies of checkpoints are comparable
        self.heldout_noise = seeded_generator(self._seed, "classifier held-out", self.device)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        ids, labels = batch["input_ids"], batch["labels"]  # (B, L), (B,)
        if self.process is not None:
            shard = batch_shard(self.trainer, ids.shape[0])  # None on one process
            _, noisy = self.process.draw_states(ids, self.training_noise, shard)
            loss = F.nll_loss(self.classifier(noisy), labels)
        else:
            log_p = self.classifier(ids)  # (B, L, C)
            per_position = F.nll_loss(
                log_p.transpose(1, 2), labels[:, None].expand_as(ids), reduction="none"
            )  # (B, L)
            real = (ids != self.classifier.pad_id).float()  # (B, L)
            loss = (per_position * real).sum() / real.sum().clamp_min(1)
        # the global batch's mean loss under DDP, as one process with the whole batch logs it
        self.log("train/loss", loss, prog_bar=True, batch_size=len(labels), sync_dist=True)
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        ids, labels = batch["input_ids"], batch["labels"]
        real = (ids != self.classifier.pad_id).any(dim=1)  # (B,): not a padding row (DDP)
        if not real.any():
            return
        ids, labels = ids[real], labels[real]
        if self.process is not None:
            for t, accuracy in zip(self.val_times, self.accuracies, strict=True):
                noisy = inputs_at_time(self.process, ids, t, self.heldout_noise)
                accuracy.update(self.classifier(noisy), labels)
        else:
            log_p = self.classifier(ids)  # (B, L, C)
            last, half = self.accuracies
            last.update(log_p[:, -1], labels)
            half.update(log_p[:, ids.shape[1] // 2], labels)

    def on_validation_epoch_end(self) -> None:
        values = [accuracy.compute() for accuracy in self.accuracies]
        for accuracy in self.accuracies:
            accuracy.reset()
        for name, value in zip(self.metric_names, values, strict=True):
            self.log(name, value, prog_bar=name == "val/acc")
        if self.process is not None:  # the monitor: the mean over the noise levels
            self.log("val/acc", torch.stack(values).mean(), prog_bar=True)

    def configure_optimizers(self) -> dict[str, Any]:
        total = int(self.trainer.estimated_stepping_batches)
        return adamw_with_cosine((self.classifier,), self.optim_cfg.lr, self.optim_cfg, total)
