"""The samplers and datasets behind the loaders that ``genodiff.data.base.DataModule`` builds
for every data module (DNA and plugins).

One process or several (DDP): a global batch is ``world_size x batch_size`` consecutive items of
the epoch's order, and process ``rank`` takes the ``rank``-th block of ``batch_size`` of them.
So N processes x batch b see exactly the batches of one process x batch N*b, and with the
objectives' ``BatchShard`` noise (``genodiff.batch_shard``) train identically.

- Training: a permutation per epoch from ``(seed, epoch)``; several processes drop the tail
  that would not fill a global batch, so every process runs the same number of steps. The
  loader is checkpointed (``ResumableLoader``): a resumed run continues mid-epoch.
- Held-out: every item exactly once over the processes; the last global batch is filled with
  all-[PAD] rows, which the held-out steps leave out of their metrics (whatever the objective
  does with [PAD]), so summed metrics are exact.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from genodiff.batch_shard import BatchShard


class EpochDataset(Protocol):
    """A dataset whose items may change per epoch (reverse-complement coins, say)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]: ...

    def set_epoch(self, epoch: int) -> None: ...


def process_share(trainer: Any) -> tuple[int, int]:
    """``(rank, world_size)`` of this process in ``trainer``'s run; ``(0, 1)`` without one."""
    if trainer is None:
        return 0, 1
    return trainer.global_rank, trainer.world_size


def batch_shard(trainer: Any, batch: int) -> BatchShard | None:
    """Where this process's ``batch`` rows sit in the global batch; None on one process."""
    rank, world = process_share(trainer)
    return BatchShard(rank * batch, world * batch) if world > 1 else None


def shared_rows(index: int, batch_size: int, rank: int, world_size: int) -> int:
    """The position in the global order of a process's ``index``-th item."""
    step, row = divmod(index, batch_size)
    return (step * world_size + rank) * batch_size + row


class EpochShuffleSampler(Sampler[int]):
    """This process's share of a random permutation per epoch (a torch.Generator seeded by
    ``(seed, epoch)``); ``resume`` makes the next pass start part-way through it."""

    def __init__(
        self,
        dataset: EpochDataset,
        seed: int,
        batch_size: int = 1,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.dataset = dataset
        self.seed = seed
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.epoch = 0
        self.skip = 0  # items of this epoch's share that the next pass leaves out

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.skip = 0
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):  # new reverse-complement coins, say
            self.dataset.set_epoch(epoch)

    def resume(self, epoch: int, consumed: int) -> None:
        """Start the next pass at item ``consumed`` of ``epoch``'s share."""
        self.set_epoch(epoch)
        self.skip = consumed

    def __len__(self) -> int:
        if self.world_size == 1:
            return len(self.dataset)
        return len(self.dataset) // (self.world_size * self.batch_size) * self.batch_size

    def __iter__(self) -> Iterator[int]:
        seed = int(np.random.SeedSequence((self.seed, self.epoch)).generate_state(1)[0])
        order = torch.randperm(len(self.dataset), generator=torch.Generator().manual_seed(seed))
        share = [
            shared_rows(i, self.batch_size, self.rank, self.world_size) for i in range(len(self))
        ]
        skip, self.skip = self.skip, 0
        yield from order[share[skip:]].tolist()


def train_position(trainer: Any, sampler: EpochShuffleSampler) -> dict[str, int]:
    """Where ``trainer``'s training stands in ``sampler``'s data (the state a
    ``ResumableLoader`` saves): the epoch and the batches consumed in it (at the end of an
    epoch: the start of the next)."""
    batches = trainer.fit_loop.epoch_loop.batch_progress.current.completed if trainer else 0
    if trainer is not None and batches >= trainer.num_training_batches:
        return {"epoch": sampler.epoch + 1, "batches": 0}
    return {"epoch": sampler.epoch, "batches": batches}


class ResumableLoader(DataLoader):
    """The train DataLoader over an ``EpochShuffleSampler``, checkpointed by Lightning (which
    calls ``state_dict`` when it saves and ``load_state_dict`` before the first batch of a
    resumed run): its state is ``position()``, the epoch and the batches consumed in it."""

    def __init__(self, *args, position: Callable[[], dict[str, int]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.position = position

    def state_dict(self) -> dict[str, int]:
        return self.position()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.sampler.resume(state["epoch"], state["batches"] * self.batch_size)


class HeldoutShard(Dataset):
    """Process ``rank``'s items of a held-out dataset, global batch by global batch; positions
    past the end are padding rows: the first item's fields (its label, in a labelled dataset)
    with all-[PAD] ids, which the held-out metrics leave out (a generative run's
    ``GenerativeTrainingModule._heldout_step``, a classifier's ``validation_step``)."""

    def __init__(
        self, dataset: Dataset, batch_size: int, rank: int, world_size: int, pad_id: int
    ) -> None:
        self.dataset, self.batch_size = dataset, batch_size
        self.rank, self.world_size = rank, world_size
        first = dataset[0]
        self.padding = {**first, "input_ids": torch.full_like(first["input_ids"], pad_id)}
        self.steps = math.ceil(len(dataset) / (world_size * batch_size))

    def __len__(self) -> int:
        return self.steps * self.batch_size

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        position = shared_rows(index, self.batch_size, self.rank, self.world_size)
        return self.dataset[position] if position < len(self.dataset) else self.padding


def seed_worker(worker_id: int) -> None:
    """Seed numpy and random in a DataLoader worker from the seed torch gave it (drawn from the
    loader's generator)."""
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
