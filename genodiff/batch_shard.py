"""Where one process's rows sit in a data-parallel global batch.

The data loaders give process ``rank`` the ``rank``-th block of every global batch
(``genodiff.data.loaders``); an objective draws its noise for the whole global batch and keeps
that block, so N processes x batch b train exactly like one process x batch N*b.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchShard:
    """This process's rows ``start : start + B`` of a global batch of ``total`` rows (data-parallel
    training). An objective draws its noise for all ``total`` rows, from a generator in the same
    state on every process, and keeps these rows, so N processes x batch b draw exactly the noise
    that one process x batch N*b draws."""

    start: int
    total: int


def shard_rows(shard: BatchShard | None, batch: int) -> tuple[int, slice]:
    """(the number of rows to draw noise for, the slice of them that ``batch`` rows are)."""
    if shard is None:
        return batch, slice(0, batch)
    if shard.start < 0 or shard.start + batch > shard.total:
        raise ValueError(f"rows {shard.start}:{shard.start + batch} lie outside {shard}")
    return shard.total, slice(shard.start, shard.start + batch)
