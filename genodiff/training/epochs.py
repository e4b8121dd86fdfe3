"""The epoch a run is in, as a user sees it, where Lightning's count has moved on.

Lightning closes an epoch's loop (``epoch_progress`` processed and completed; its
``trainer.current_epoch``) whenever the loop over the batches ends, also when
``trainer.max_steps`` ended it part-way. A run of 400 steps in an epoch of 1,000 batches then
ends "in epoch 1" although every progress line said epoch 0, and its ``last.ckpt`` records
that closed epoch: a resume from it started epoch 1 at its first batch (Lightning tells the
sampler the next epoch), skipping the rest of epoch 0 and drawing new augmentation coins,
whatever the loader's saved position said. Here the epoch shown is the one of the latest
training batch, and such a checkpoint records the epoch as still running.
"""

from __future__ import annotations

from typing import Any

import lightning as L

#: Where Lightning's checkpoints keep the fit loop's state.
LOOPS_KEY = "loops"


def trained_epoch(trainer: L.Trainer) -> int:
    """The epoch of the latest training batch, counted from 0 (the progress lines' epoch):
    the last epoch started, whether or not Lightning has closed it."""
    return max(trainer.fit_loop.epoch_progress.current.started - 1, 0)


def reopen_cut_epoch(checkpoint: dict[str, Any]) -> None:
    """Make ``checkpoint`` (a Lightning training checkpoint, changed in place) record the epoch
    its train loader is still in as running, where Lightning closed it because
    ``trainer.max_steps`` ended the run part-way through, so that a resume goes on with that
    epoch's next batch; and its ``epoch`` the epoch of the latest training batch (counted from
    0). Checkpoints without a loader position (``genodiff.data.loaders.ResumableLoader``), or
    whose epoch ended with its last batch, keep Lightning's counts."""
    fit = checkpoint.get(LOOPS_KEY, {}).get("fit_loop", {})
    progress = fit.get("epoch_progress")
    if not progress:
        return
    started = progress["current"]["started"]
    checkpoint["epoch"] = max(started - 1, 0)
    loaders = fit.get("state_dict", {}).get("combined_loader") or []
    positions = [state for state in loaders if isinstance(state, dict) and "epoch" in state]
    closed = progress["current"]["processed"] == started
    if positions and closed and positions[0]["epoch"] == started - 1:
        for counts in (progress["current"], progress["total"]):
            counts["processed"] = counts["completed"] = counts["started"] - 1
