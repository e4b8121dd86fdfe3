"""Training progress as plain lines, for a stderr that is no terminal (a log file, a notebook
cell, ``nohup``), where Lightning's bars, redrawn in place, show as noise or not at all:

    genodiff train: steps 120/400 (30%), 2.1 steps/s, 0:57, ETA 2:13, epoch 0, train/nelbo 1.23

at the first step (without rate and ETA: they count from it), every
``genodiff.progress.LINE_INTERVAL`` seconds and at the last (``genodiff.progress.Progress``
draws it); and a line with each validation's result as it comes:

    genodiff train: validation after 200 steps, epoch 0: val/nelbo 1.25, val/ppl 3.49

``genodiff.training.trainer.progress_bars`` picks it where stderr is no terminal; a terminal
keeps Lightning's bar.
"""

from __future__ import annotations

from typing import Any, TextIO

import lightning as L
from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar

from genodiff.progress import Progress
from genodiff.training.epochs import trained_epoch


class PlainProgressBar(ProgressBar):
    """One line per interval with the optimizer step, its total (``max_steps``, or the
    epochs' steps), steps/s, the ETA, the epoch and the logged train metrics (``train/...``);
    one after each validation with its metrics (``val/...``).
    ``label`` starts each line; ``interval``: seconds between lines (default as
    ``Progress``'s); only global rank 0 writes."""

    def __init__(
        self, label: str, stream: TextIO | None = None, interval: float | None = None
    ) -> None:
        super().__init__()
        self.label, self.stream, self.interval = label, stream, interval
        self.enabled = True
        self.lines: Progress | None = None
        self.total: float | None = None

    def disable(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    @property
    def is_enabled(self) -> bool:
        return self.enabled

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A resumed run starts at the checkpoint's step: its rate counts this process's steps.
        start = trainer.global_step
        self.lines = Progress(self.label, self.enabled, self.stream, self.interval, start)
        self.total = float(trainer.estimated_stepping_batches)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any
    ) -> None:
        self._draw(trainer, force=False)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.lines is None or trainer.sanity_checking:
            return
        metrics = _metrics(trainer, "val/")
        if metrics:  # a log file's only view of each validation's result
            step = f"validation after {trainer.global_step} steps, epoch {trained_epoch(trainer)}"
            self.lines.note(f"{step}: {', '.join(metrics)}")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A run stopped early (early stopping, SIGTERM) says where it stopped.
        if self.total is None or trainer.global_step < self.total:
            self._draw(trainer, force=True)

    def _draw(self, trainer: L.Trainer, force: bool) -> None:
        if self.lines is None:
            return
        extra = ", ".join([f"epoch {trained_epoch(trainer)}", *_metrics(trainer, "train/")])
        self.lines.update(trainer.global_step, self.total, "steps", extra, force)


def _metrics(trainer: L.Trainer, prefix: str) -> list[str]:
    """``NAME VALUE`` of each metric logged for the progress bar whose name starts ``prefix``."""
    return [
        f"{name} {float(value):.4g}"
        for name, value in trainer.progress_bar_metrics.items()
        if name.startswith(prefix)
    ]
