"""Lightning DataModules over genome windows: ``fasta`` (any FASTA) and ``hg38`` (BED splits).

The constructor keywords are the keys of the ``data:`` section of a config. Nothing is read
in ``__init__``; call ``check_files()`` early (before building a model) to fail fast on a
missing genome, and ``setup()`` builds the datasets. Training order is shuffled by a sampler
seeded from ``(seed, epoch)``; Lightning calls its ``set_epoch``, which also gives the train
dataset new reverse-complement coins, so a run is reproducible for any ``num_workers``. The train
loader is resumable: a checkpoint records the epoch and the batches consumed in it, and a resumed
run goes on with the next batch of the same permutation.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from genodiff.data.base import DataModule
from genodiff.data.hg38 import Hg38Dataset
from genodiff.data.windows import FastaWindowDataset, GenomeWindowDataset
from genodiff.registry import register_data
from genodiff.resources import resource
from genodiff.tokenizers import DNATokenizer

# The bundled demo genome (human chr22:20,000,001-21,000,000), used when no FASTA is given;
# the repository's data/ in a checkout, package data in a wheel (genodiff.resources).
DEMO_FASTA = resource("data/chr22_20-21Mb.fa.gz")
HG38_FETCH_HINT = "genodiff data hg38 --dest {folder}"
# ``genodiff eval --fasta FILE`` skips a window when more than this fraction of it is N.
FILE_MAX_N_FRACTION = 0.5


class EpochShuffleSampler(Sampler[int]):
    """A random permutation per epoch from a torch.Generator seeded by ``(seed, epoch)``;
    ``resume`` makes the next pass start part-way through an epoch's permutation."""

    def __init__(self, dataset: GenomeWindowDataset, seed: int) -> None:
        self.dataset = dataset
        self.seed = seed
        self.epoch = 0
        self.skip = 0  # indices of this epoch's permutation that the next pass leaves out

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.skip = 0
        self.epoch = epoch
        self.dataset.set_epoch(epoch)

    def resume(self, epoch: int, consumed: int) -> None:
        """Start the next pass at index ``consumed`` of ``epoch``'s permutation."""
        self.set_epoch(epoch)
        self.skip = consumed

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[int]:
        seed = int(np.random.SeedSequence((self.seed, self.epoch)).generate_state(1)[0])
        generator = torch.Generator().manual_seed(seed)
        skip, self.skip = self.skip, 0
        yield from torch.randperm(len(self.dataset), generator=generator).tolist()[skip:]


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


def _seed_worker(worker_id: int) -> None:
    # torch seeds each worker from the loader's generator; pass that on to numpy and random.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


class _GenomeDataModule(DataModule, ABC):
    """Shared loaders; subclasses provide ``check_files`` and ``_dataset(split)`` and set
    ``max_length`` and ``add_eos``."""

    domain = "dna"
    file_option = "--fasta"
    max_length: int
    add_eos: bool

    def __init__(
        self, batch_size: int, eval_batch_size: int | None, num_workers: int, seed: int
    ) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size if eval_batch_size is not None else batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.tokenizer = DNATokenizer()
        self.datasets: dict[str, GenomeWindowDataset] = {}

    @abstractmethod
    def _dataset(self, split: str) -> GenomeWindowDataset:
        """The dataset of ``split`` ("train", "valid" or "test")."""

    def setup(self, stage: str | None = None) -> None:
        self.check_files()
        splits = {"fit": ("train", "valid"), "validate": ("valid",), "test": ("test",)}
        for split in splits.get(stage, ("train", "valid", "test")):
            if split not in self.datasets:
                self.datasets[split] = self._dataset(split)

    def heldout_dataset(self, split: str = "test") -> GenomeWindowDataset:
        self.setup("test" if split == "test" else "validate")
        return self.datasets[split]

    def file_dataset(self, path: str | Path) -> GenomeWindowDataset:
        """Non-overlapping windows tiling every record of a FASTA (windows with more than
        ``FILE_MAX_N_FRACTION`` N skipped, no reverse complement)."""
        return FastaWindowDataset(
            path,
            "test",
            max_length=self.max_length,
            split_fractions=(0.0, 0.0, 1.0),  # the whole of every record
            max_n_fraction=FILE_MAX_N_FRACTION,
            add_eos=self.add_eos,
        )

    def _get(self, split: str) -> GenomeWindowDataset:
        if split not in self.datasets:
            self.setup()
        dataset = self.datasets[split]
        if len(dataset) == 0:
            raise ValueError(
                f"the {split} split has no windows; use a smaller max_length or a longer genome"
            )
        return dataset

    def _loader(
        self, dataset: Dataset, batch_size: int, cls: type[DataLoader] = DataLoader, **kwargs
    ) -> DataLoader:
        return cls(
            dataset,
            batch_size=batch_size,
            num_workers=self.num_workers,
            worker_init_fn=_seed_worker,
            generator=torch.Generator().manual_seed(self.seed),
            persistent_workers=False,  # workers must see each epoch's set_epoch
            **kwargs,
        )

    def train_dataloader(self) -> DataLoader:
        dataset = self._get("train")
        sampler = EpochShuffleSampler(dataset, self.seed)
        position = partial(self._train_position, sampler)
        return self._loader(
            dataset, self.batch_size, ResumableLoader, sampler=sampler, position=position
        )

    def _train_position(self, sampler: EpochShuffleSampler) -> dict[str, int]:
        """Where training stands in the data: the epoch and the batches consumed in it (at the
        end of an epoch: the start of the next)."""
        trainer = self.trainer
        batches = trainer.fit_loop.epoch_loop.batch_progress.current.completed if trainer else 0
        if trainer is not None and batches >= trainer.num_training_batches:
            return {"epoch": sampler.epoch + 1, "batches": 0}
        return {"epoch": sampler.epoch, "batches": batches}

    def val_dataloader(self) -> DataLoader:
        return self._loader(self._get("valid"), self.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self._get("test"), self.eval_batch_size)


@register_data("fasta")
class FastaDataModule(_GenomeDataModule):
    """Windows of any FASTA, each record split by region into train | valid | test.

    ``fasta=None`` means the bundled demo genome (``data/chr22_20-21Mb.fa.gz``).
    """

    def __init__(
        self,
        fasta: str | None = None,
        max_length: int = 1024,
        split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
        max_n_fraction: float = 0.5,
        rc_aug: bool = True,
        add_eos: bool = False,
        batch_size: int = 16,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(batch_size, eval_batch_size, num_workers, seed)
        self.fasta = Path(fasta) if fasta is not None else DEMO_FASTA
        self.max_length = max_length
        self.split_fractions = tuple(split_fractions)
        self.max_n_fraction = max_n_fraction
        self.rc_aug = rc_aug
        self.add_eos = add_eos
        self.cache_dir = cache_dir

    def check_files(self) -> None:
        if not self.fasta.is_file():
            raise FileNotFoundError(f"FASTA file not found: {self.fasta} (data.fasta)")

    def data_files(self) -> list[Path]:
        return [self.fasta]

    def _dataset(self, split: str) -> GenomeWindowDataset:
        return FastaWindowDataset(
            self.fasta,
            split,
            max_length=self.max_length,
            split_fractions=self.split_fractions,
            max_n_fraction=self.max_n_fraction,
            rc_aug=self.rc_aug and split == "train",
            add_eos=self.add_eos,
            seed=self.seed,
            cache_dir=self.cache_dir,
        )


@register_data("hg38")
class Hg38DataModule(_GenomeDataModule):
    """hg38 windows from the Basenji BED splits, as Caduceus builds them (see data/hg38.py).

    ``limit_windows`` caps every split's window count (for quick debugging runs).
    """

    def __init__(
        self,
        fasta: str = "data/hg38/hg38.ml.fa",
        bed: str = "data/hg38/human-sequences.bed",
        max_length: int = 1024,
        rc_aug: bool = True,
        add_eos: bool = False,
        batch_size: int = 16,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        cache_dir: str | None = None,
        limit_windows: int | None = None,
    ) -> None:
        super().__init__(batch_size, eval_batch_size, num_workers, seed)
        self.fasta = Path(fasta)
        self.bed = Path(bed)
        self.max_length = max_length
        self.rc_aug = rc_aug
        self.add_eos = add_eos
        self.cache_dir = cache_dir
        self.limit_windows = limit_windows

    def check_files(self) -> None:
        for key, path in (("fasta", self.fasta), ("bed", self.bed)):
            if not path.is_file():
                raise FileNotFoundError(
                    f"hg38 {key} file not found: {path} (data.{key}). Download hg38 with: "
                    + HG38_FETCH_HINT.format(folder=path.parent)
                )

    def data_files(self) -> list[Path]:
        return [self.fasta, self.bed]

    def _dataset(self, split: str) -> GenomeWindowDataset:
        return Hg38Dataset(
            self.fasta,
            self.bed,
            split,
            max_length=self.max_length,
            rc_aug=self.rc_aug and split == "train",
            add_eos=self.add_eos,
            seed=self.seed,
            cache_dir=self.cache_dir,
            limit_windows=self.limit_windows,
        )
