"""The epoch a Lightning training checkpoint records, as a resume and a user see it.

Lightning closes an epoch's loop (``epoch_progress`` processed and completed; its
``trainer.current_epoch``) whenever the loop over the batches ends, also when
``trainer.max_steps`` ended it part-way. A run of 400 steps in an epoch of 1,000 batches then
ends "in epoch 1" although every progress line said epoch 0, and its ``last.ckpt`` records
that closed epoch: a resume from it started epoch 1 at its first batch (Lightning tells the
sampler the next epoch), skipping the rest of epoch 0 and drawing new augmentation coins,
whatever the loader's saved position said. ``reopen_cut_epoch`` makes such a checkpoint record
the epoch as still running, and its ``epoch`` the one of the latest training batch: as each
checkpoint is written (``genodiff.training.trainer.LatestCheckpoint``), and as any is read
(``load.open_checkpoint``: a resume, ``genodiff info``, an export), so that a checkpoint an
earlier genodiff wrote is read as the resume goes on with it.
"""

from __future__ import annotations

from typing import Any

#: Where Lightning's checkpoints keep the fit loop's state.
LOOPS_KEY = "loops"


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` where it is a mapping, else an empty one (a checkpoint without Lightning's
    loop state, or with a section edited out of its shape, is read as one without it)."""
    return value if isinstance(value, dict) else {}


def reopen_cut_epoch(checkpoint: dict[str, Any]) -> None:
    """Make ``checkpoint`` (a Lightning training checkpoint, changed in place) record the epoch
    its train loader is still in as running, where Lightning closed it because
    ``trainer.max_steps`` ended the run part-way through, so that a resume goes on with that
    epoch's next batch; and its ``epoch`` the epoch of the latest training batch (counted from
    0). Checkpoints without a loader position (``genodiff.data.loaders.ResumableLoader``), or
    whose epoch ended with its last batch, keep Lightning's counts; checkpoints without
    Lightning's epoch counts are left as they are. Applying it again changes nothing."""
    fit = _mapping(_mapping(checkpoint.get(LOOPS_KEY)).get("fit_loop"))
    progress = _mapping(fit.get("epoch_progress"))
    counts = [_mapping(progress.get(key)) for key in ("current", "total")]
    if not all(isinstance(c.get(n), int) for c in counts for n in ("started", "processed")):
        return
    started = counts[0]["started"]
    checkpoint["epoch"] = max(started - 1, 0)
    loaders = _mapping(fit.get("state_dict")).get("combined_loader")
    loaders = loaders if isinstance(loaders, list) else []
    positions = [state for state in loaders if isinstance(state, dict) and "epoch" in state]
    closed = counts[0]["processed"] == started
    if positions and closed and positions[0]["epoch"] == started - 1:
        for count in counts:
            count["processed"] = count["completed"] = count["started"] - 1
