"""The epoch a run is in, as a user sees it, where Lightning's count has moved on: Lightning
closes an epoch's loop also when ``trainer.max_steps`` ended it part-way
(``genodiff.checkpoints.epochs`` says more, and what its checkpoints then record). The
progress lines and logs give the epoch of the latest training batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lightning as L


def trained_epoch(trainer: L.Trainer) -> int:
    """The epoch of the latest training batch, counted from 0 (the progress lines' epoch):
    the last epoch started, whether or not Lightning has closed it."""
    return max(trainer.fit_loop.epoch_progress.current.started - 1, 0)
