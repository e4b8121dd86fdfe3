"""The LightningModule that trains a ``GenerativeModel``: training, validation and test steps,
held-out NELBO and perplexity, the EMA updates, the optimiser, and the run's state (RNG, training
noise, tokens seen, data digest) in every checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torchmetrics import SumMetric

from genodiff.batch_shard import BatchShard
from genodiff.checkpoints.io import RUN_STATE_KEY
from genodiff.conditioning import ConditioningConfig, drop_labels, null_labels
from genodiff.config import OptimConfig
from genodiff.data.base import DataModule, files_digest
from genodiff.data.loaders import batch_shard
from genodiff.errors import InputValueError, TrainingDivergedError
from genodiff.model import GenerativeModel
from genodiff.tokenizers import CHECKPOINT_KEY, Tokenizer, tokenizer_record
from genodiff.training.optim import (
    adamw_with_cosine,
    apply_settings,
    regroup_earlier_optimizer_state,
)
from genodiff.training.random_state import RandomStateInCheckpoints, seeded_generator
from genodiff.user_warnings import warn_user

NOISE_KEY = "genodiff_training_noise"  # the state of GenerativeTrainingModule.training_noise


# GenerativeModel comes first in the bases, so that its __init__ (which takes the config) runs
# and its super().__init__() reaches LightningModule's: the state-dict keys are the model's own.
class GenerativeTrainingModule(GenerativeModel, RandomStateInCheckpoints):
    """Trains the ``GenerativeModel`` it extends (``backbone`` with ``objective``, whatever the
    objective: diffusion or next-token prediction); validation and sampling use the EMA weights.

    Logged metrics: ``train/nelbo``, ``val/nelbo`` and ``test/nelbo`` (nats per token; the
    training one is the objective's training loss, which for D3PM adds T * ``hybrid_lambda``
    times its cross-entropy to the NELBO), and ``val/ppl``, ``test/ppl`` (perplexity bound = exp of
    the NELBO summed over all held-out tokens divided by their number). A class-conditional
    run (``conditioning.labels``) trains with label dropout (``conditioning.cond_dropout``,
    coins from the training noise) and scores held-out data twice on the same noise draws:
    ``val/nelbo`` with each sequence's true label (p(x | y)) and ``val/nelbo_unconditional``
    with the null label (p(x), the number to compare with an unconditional model); likewise
    ``test/``.
    """

    state_copies = 3  # each parameter's gradient and AdamW's two moments

    def __init__(self, config: dict[str, Any], tokenizer: Tokenizer | None = None) -> None:
        super().__init__(config, tokenizer)
        self.save_hyperparameters({"config": self.config})
        self.optim_cfg = OptimConfig(**self.config.get("optim", {}))
        # nan_strategy="disable": a NaN must reach _log_heldout, not be dropped as a warning.
        self.heldout_nelbo = SumMetric(nan_strategy="disable")
        self.heldout_tokens = SumMetric(nan_strategy="disable")
        self.heldout_nelbo_unconditional = SumMetric(nan_strategy="disable")
        self.cond_dropout = ConditioningConfig(**self.config.get("conditioning", {})).cond_dropout
        self._seed = int(config.get("seed", 0))
        self.training_noise: torch.Generator | None = None  # set in on_train_start
        self._noise_to_restore: Tensor | None = None
        self.heldout_noise: torch.Generator | None = None  # set at each validation / test
        # Token positions (padding included) in every training batch of every process so far.
        self.tokens_seen = 0
        self.data_digest: str | None = None  # of the training data files (see record_data)

    def record_data(self, datamodule: DataModule) -> None:
        """Hash the files the training data comes from into every checkpoint of the run."""
        files = datamodule.data_files()
        self.data_digest = files_digest(files) if files else None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[CHECKPOINT_KEY] = tokenizer_record(self.tokenizer)
        if self.training_noise is not None:
            checkpoint[NOISE_KEY] = self.training_noise.get_state()
        checkpoint[RUN_STATE_KEY] = {
            "tokens_seen": self.tokens_seen,
            "data_digest": self.data_digest,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        regroup_earlier_optimizer_state(checkpoint, self._optimized())
        self._noise_to_restore = checkpoint.get(NOISE_KEY)
        run = checkpoint.get(RUN_STATE_KEY, {})
        self.tokens_seen = run.get("tokens_seen", 0)
        recorded = run.get("data_digest")
        if self.data_digest is None:
            self.data_digest = recorded
        elif recorded is not None and recorded != self.data_digest:
            warn_user(
                f"the training data files differ from those the checkpoint was trained on "
                f"({recorded} then, {self.data_digest} now); checkpoints from here on record "
                "the new digest"
            )

    def on_train_start(self) -> None:
        # The training noise has a generator of its own, seeded from the run's seed alone: the
        # same stream on every DDP process (each keeps its rows of the global batch's draws)
        # and in a one-process run, whatever the launcher did to the global RNG.
        self.training_noise = seeded_generator(self._seed, "training noise", self.device)
        if self._noise_to_restore is not None:  # resuming: go on where the checkpoint left it
            self.training_noise.set_state(self._noise_to_restore)
            self._noise_to_restore = None
        # A resumed run trains with its own optim settings (another optim.lr, say), not those
        # Lightning restored from the checkpoint with the optimizer's state.
        schedule = self.trainer.lr_scheduler_configs[0].scheduler
        optimizer = self.trainer.optimizers[0]
        apply_settings(optimizer, schedule, self._optimized(), self.optim_cfg.lr, self.optim_cfg)
        super().on_train_start()

    def _start_heldout(self) -> None:
        # Every validation and test draws the same noise (common random numbers: checkpoints
        # are compared on equal draws), without touching the training stream.
        self.heldout_noise = seeded_generator(self._seed, "held-out noise", self.device)

    def on_validation_epoch_start(self) -> None:
        self._start_heldout()

    def on_test_epoch_start(self) -> None:
        self._start_heldout()

    def _non_finite(self, what: str, value: Tensor, advice: str) -> TrainingDivergedError:
        """The error that stops a run on a non-finite ``what``; says how to go on."""
        callback = self.trainer.checkpoint_callback
        last = Path(callback.last_model_path) if callback and callback.last_model_path else None
        if last is not None and last.is_file():
            then = f"then resume from {last} with ckpt_path=last"
        else:
            then = "then start the run again (no checkpoint was written before this step)"
        return TrainingDivergedError(
            f"{what} is {value.item()} at step {self.global_step}; no checkpoint was written for "
            f"this step. {advice}, {then}."
        )

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        ids = batch["input_ids"]  # (B, L)
        shard = batch_shard(self.trainer, ids.shape[0])  # None on one process
        labels = self.training_labels(batch, shard)
        nelbo, tokens = self.objective.loss(self.backbone, ids, self.training_noise, shard, labels)
        # NELBO and scored tokens of the global batch (summed over the processes). The loss is
        # this process's part of the global mean, so DDP's gradient average equals the gradient
        # of one process on the whole global batch.
        totals = torch.stack([nelbo.sum().detach(), tokens.sum().to(nelbo.dtype)])
        if shard is not None:
            totals = self.trainer.strategy.reduce(totals, reduce_op="sum")
        global_tokens = totals[1].clamp_min(1)
        global_nelbo = totals[0] / global_tokens
        if not torch.isfinite(global_nelbo):
            advice = (
                "Lower optim.lr, keep trainer.gradient_clip_val, or train in fp32 "
                "(trainer.precision=32-true)"
            )
            raise self._non_finite("training loss", global_nelbo, advice)
        self.log("train/nelbo", global_nelbo, prog_bar=True)
        self.tokens_seen += ids.numel() * self.trainer.world_size
        return nelbo.sum() * self.trainer.world_size / global_tokens

    def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
        # The averages follow the optimizer's steps: with trainer.accumulate_grad_batches=k a
        # step takes k batches, and averaging after each batch would count each step k times.
        super().optimizer_step(*args, **kwargs)
        if self.ema is not None:
            self.ema.update_parameters(self.backbone)
        if self.objective_ema is not None:
            self.objective_ema.update_parameters(self.objective)

    def _batch_labels(self, batch: dict[str, Tensor]) -> Tensor | None:
        """The batch's class labels (B,) for a conditional run; None for an unconditional one
        (whose data may still carry labels: they are not used)."""
        if self.class_names is None:
            return None
        if "labels" not in batch:
            raise InputValueError(
                "this run is class-conditional (conditioning.labels), but its data items "
                "carry no labels; use a labelled data module (data.name=labelled)"
            )
        return batch["labels"]

    def training_labels(
        self, batch: dict[str, Tensor], shard: BatchShard | None = None
    ) -> Tensor | None:
        """The labels (B,) a training batch is scored with: each replaced by the null label
        with probability ``conditioning.cond_dropout``, the coins drawn from the training noise
        (so the null label's share of every batch trains p(x)); None when unconditional."""
        labels = self._batch_labels(batch)
        if labels is None:
            return None
        num_classes = len(self.class_names)
        return drop_labels(labels, self.cond_dropout, num_classes, self.training_noise, shard)

    def _heldout_step(self, batch: dict[str, Tensor]) -> None:
        """Accumulate the NELBO of ``eval_t_samples`` noise draws per window (EMA weights);
        for a conditional run also with the null label, on the same draws. A row of nothing
        but [PAD] is a filler row (``HeldoutShard`` completes the last global batch with them
        under DDP): it draws its noise, so the other rows keep theirs, and adds nothing, also
        where the objective scores [PAD] (``objective.padding=bound``)."""
        objective, ids = self.eval_objective, batch["input_ids"]  # (B, L)
        shard = batch_shard(self.trainer, ids.shape[0])  # None on one process
        labels = self._batch_labels(batch)
        real = (ids != self.tokenizer.pad_id).any(dim=1)  # (B,): not a filler row

        def real_sum(values: Tensor) -> Tensor:  # (B,) -> (): the real rows' total
            return torch.where(real, values, 0).sum()

        for _ in range(objective.eval_t_samples):
            draws = self.heldout_noise.get_state()
            nelbo, tokens = objective.loss(
                self.eval_backbone, ids, self.heldout_noise, shard, labels
            )
            self.heldout_nelbo.update(real_sum(nelbo))
            self.heldout_tokens.update(real_sum(tokens))
            if labels is not None:
                self.heldout_noise.set_state(draws)  # common random numbers for p(x)
                null = null_labels(ids.shape[0], len(self.class_names), ids.device)
                nelbo_null, _ = objective.loss(
                    self.eval_backbone, ids, self.heldout_noise, shard, null
                )
                self.heldout_nelbo_unconditional.update(real_sum(nelbo_null))

    def _log_heldout(self, stage: str) -> None:
        nelbo = self.heldout_nelbo.compute() / self.heldout_tokens.compute().clamp_min(1)
        if not torch.isfinite(nelbo):
            advice = (
                "Check ema.decay (in [0, 1]; ema.decay=0 turns the average off), lower optim.lr "
                "or train in fp32 (trainer.precision=32-true)"
            )
            raise self._non_finite(f"the {stage} NELBO", nelbo, advice)
        # Already the total over every process (SumMetric syncs): sync_dist averages equal values.
        self.log(f"{stage}/nelbo", nelbo, prog_bar=True, sync_dist=True)
        self.log(f"{stage}/ppl", torch.exp(nelbo), prog_bar=True, sync_dist=True)
        if self.class_names is not None:
            tokens = self.heldout_tokens.compute().clamp_min(1)
            unconditional = self.heldout_nelbo_unconditional.compute() / tokens
            self.log(f"{stage}/nelbo_unconditional", unconditional, sync_dist=True)
        self.heldout_nelbo.reset()
        self.heldout_tokens.reset()
        self.heldout_nelbo_unconditional.reset()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._heldout_step(batch)

    def on_validation_epoch_end(self) -> None:
        self._log_heldout("val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._heldout_step(batch)

    def on_test_epoch_end(self) -> None:
        self._log_heldout("test")

    def configure_optimizers(self) -> dict[str, Any]:
        total = int(self.trainer.estimated_stepping_batches)
        return adamw_with_cosine(self._optimized(), self.optim_cfg.lr, self.optim_cfg, total)

    def _optimized(self) -> tuple[torch.nn.Module, ...]:
        """The modules whose parameters the optimizer trains."""
        return (self.backbone, self.objective)
