"""Data modules over genome windows: ``fasta`` (any FASTA) and ``hg38`` (BED splits).

The constructor keywords are the keys of the ``data:`` section of a config. Nothing is read
in ``__init__``; call ``check_files()`` early (before building a model) to fail fast on a
missing genome, and ``setup()`` builds the datasets. Training order is shuffled by a sampler
seeded from ``(seed, epoch)``; Lightning calls its ``set_epoch``, which also gives the train
dataset new reverse-complement coins, so a run is reproducible for any ``num_workers``. The train
loader is resumable: a checkpoint records the epoch and the batches consumed in it, and a resumed
run goes on with the next batch of the same permutation. ``window_texts`` gives a split's
windows as bases (``genodiff.Model.windows``: real sequences to compare samples with).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from genodiff.data.base import DataModule
from genodiff.data.genome import Genome
from genodiff.data.hg38 import Hg38Dataset
from genodiff.data.windows import (
    FastaWindowDataset,
    GenomeWindowDataset,
    SequenceDataset,
    check_split,
)
from genodiff.errors import InputValueError, require_regular_file
from genodiff.registry import register_data
from genodiff.resources import resource
from genodiff.tokenizers import DNATokenizer

# The bundled demo genome (human chr22:20,000,001-21,000,000), used when no FASTA is given;
# the repository's data/ in a checkout, package data in a wheel (genodiff.resources).
DEMO_FASTA = resource("data/chr22_20-21Mb.fa.gz")
HG38_FETCH_HINT = "genodiff data hg38 --dest {folder}"
# ``genodiff eval --file FILE`` skips a window when more than this fraction of it is N (its
# error for a file of no window says so: ``DNADomain.eval_file``).
FILE_MAX_N_FRACTION = 0.5


def open_genome(fasta: Path, cache_dir: str | None) -> None:
    """Open (and index) ``fasta`` once, so that a malformed or plain-gzip FASTA, or an index
    that cannot be written, fails in ``check_files``: before a run writes anything."""
    Genome(fasta, cache_dir=cache_dir).close()


class _GenomeDataModule(DataModule, ABC):
    """Genome windows; subclasses provide ``check_files`` and ``_dataset(split)`` and set
    ``max_length`` and ``add_eos``. Datasets code bases with the attached tokenizer (the DNA
    tokenizer until one is attached)."""

    domain = DNATokenizer.domain

    def window_texts(self, split: str) -> list[str]:
        """The bases of every window of ``split`` as training cuts them, upper-cased and
        without reverse-complement augmentation."""
        check_split(split)
        self.setup("fit" if split in ("train", "valid") else "test")
        dataset = self.datasets[split]
        return [dataset.genome.fetch(*dataset.window(i)).upper() for i in range(len(dataset))]

    max_length: int
    add_eos: bool

    def __init__(
        self, batch_size: int, eval_batch_size: int | None, num_workers: int, seed: int
    ) -> None:
        super().__init__(batch_size, eval_batch_size, num_workers, seed)
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
            tokenizer=self.tokenizer,
        )

    def training_overlap(self, dataset: GenomeWindowDataset, indices: Sequence[int]) -> list[bool]:
        """Whether each window ``indices`` of ``dataset`` shares a base with a train window."""
        trained = self.dataset_of("train").coverage()
        return [trained.overlaps(*dataset.window(i)) for i in indices]

    def sequences_dataset(self, sequences: Sequence[str]) -> SequenceDataset:
        """Each sequence whole, as one window of a file (N as [PAD], [SEP] with add_eos)."""
        return SequenceDataset(sequences, self.tokenizer, self.add_eos)

    def dataset_of(self, split: str) -> GenomeWindowDataset:
        if split not in self.datasets:
            self.setup()
        dataset = self.datasets[split]
        if len(dataset) == 0:
            raise InputValueError(
                f"the {split} split has no windows; use a smaller max_length or a longer genome"
            )
        return dataset


@register_data("fasta")
class FastaDataModule(_GenomeDataModule):
    """Windows of any FASTA, each record split by region into train | valid | test.

    ``fasta=None`` means the bundled demo genome (``data/chr22_20-21Mb.fa.gz``).
    """

    data_file_keys = ("fasta",)
    path_keys = ("fasta", "cache_dir")

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
        missing = f"FASTA file not found: {self.fasta} (data.fasta)"
        require_regular_file(self.fasta, "FASTA file (data.fasta)", missing=missing)
        open_genome(self.fasta, self.cache_dir)

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
            tokenizer=self.tokenizer,
        )


@register_data("hg38")
class Hg38DataModule(_GenomeDataModule):
    """hg38 windows from the Basenji BED splits, as Caduceus builds them (see data/hg38.py).

    ``limit_windows`` caps every split's window count (for quick debugging runs).
    """

    data_file_keys = ("fasta", "bed")
    path_keys = ("fasta", "bed", "cache_dir")

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
            missing = (
                f"hg38 {key} file not found: {path} (data.{key}). Download hg38 with: "
                + HG38_FETCH_HINT.format(folder=path.parent)
            )
            require_regular_file(path, f"hg38 {key} file (data.{key})", missing=missing)
        open_genome(self.fasta, self.cache_dir)

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
            tokenizer=self.tokenizer,
        )
