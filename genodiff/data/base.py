"""The data-module contract: what the core asks of a data module, built-in or plugin.

A data module is a ``DataModule`` subclass whose constructor keywords are the ``data:`` config
keys and which passes ``batch_size``, ``eval_batch_size``, ``num_workers`` and ``seed`` on to
``DataModule.__init__``. Plugins register theirs through the ``genodiff.data`` entry-point
group. The core calls, in order: ``check_files()`` (fail fast on missing input),
``training_texts()`` (only for a tokenizer that is trained on the data),
``attach_tokenizer(tokenizer)``, then ``setup(stage)`` and the loaders. ``genodiff eval`` uses
``heldout_dataset()`` and ``file_dataset()``.

``DataModule`` is a plain class, not Lightning's ``LightningDataModule``: loading a model,
generating and scoring build a data module and import no Lightning. A training run hands
Lightning's Trainer a ``genodiff.training.lightning_data.LightningData`` wrapping the module,
which forwards ``setup``, the loaders and ``state_dict`` / ``load_state_dict``, and sets
``trainer`` (None outside a training run: one process). Lightning's other data-module hooks
are never called, so a subclass that defines one is refused, as is one that defines a loader.

A subclass returns datasets (``dataset_of(split)``), never loaders: this base builds the train,
validation and test loaders (``genodiff.data.loaders``), shuffled per epoch from
``(seed, epoch)``, resumable mid-epoch, and split over the processes of a data-parallel run, so
every data module trains correctly on several processes. A subclass that defines a loader of
its own is refused when it is defined.

Datasets yield ``{"input_ids": LongTensor[L]}`` items ([PAD] is never corrupted nor scored),
with ``"labels"`` (a class id, LongTensor[]) in a labelled module's (``class_names()``),
and name each item with ``item_name(index)`` (a genome window ``chr:start-end``, a text block
``line 12``), which the evaluation digest hashes together with the ids.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch
from torch.utils.data import DataLoader

from genodiff.data.loaders import (
    EpochShuffleSampler,
    HeldoutShard,
    ResumableLoader,
    process_share,
    seed_worker,
    train_position,
)
from genodiff.errors import InputValueError
from genodiff.tokenizers import Tokenizer

if TYPE_CHECKING:
    from lightning.pytorch import Trainer

# The loaders that ``DataModule`` provides and a subclass must not redefine.
LOADER_HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader")
# LightningDataModule's other hooks, which the Trainer never calls on a genodiff data module
# (``LightningData`` forwards only setup, the loaders and the state).
LIGHTNING_ONLY_HOOKS = (
    "prepare_data",
    "teardown",
    "on_exception",
    "predict_dataloader",
    "transfer_batch_to_device",
    "on_before_batch_transfer",
    "on_after_batch_transfer",
)


class NamedItemDataset(Protocol):
    """A dataset of fixed-length id sequences whose items have names."""

    max_length: int

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]: ...

    def item_name(self, index: int) -> str: ...


class DataModule(ABC):
    """Base of every genodiff data module. ``domain`` is the tokenizer domain it takes
    (``genodiff.domains``: ``"dna"`` for the built-in modules). ``batch_size`` is each
    process's training batch, ``eval_batch_size`` (default: ``batch_size``) its held-out batch.
    ``trainer`` is the Lightning Trainer reading the loaders (``LightningData`` sets it), whose
    processes the loaders split the data over; None reads it in one process."""

    domain: ClassVar[str]
    #: The ``data:`` keys naming the files or folders the data are read from, in order
    #: (``genodiff info`` and ``genodiff eval`` report them).
    data_file_keys: ClassVar[tuple[str, ...]] = ()
    #: Every ``data:`` key holding a path (the data files, a cache folder, ...): a relative
    #: one is resolved against the project root when a config is loaded.
    path_keys: ClassVar[tuple[str, ...]] = ()
    tokenizer: Tokenizer
    trainer: Trainer | None
    #: Allowed ranges of constructor arguments that data modules share, checked when a config
    #: is loaded (``genodiff.config_values``); a subclass adds its own in the same attribute.
    config_ranges: ClassVar[dict[str, str]] = {
        "batch_size": ">=1",
        "eval_batch_size": ">=1",
        "max_length": ">=1",
        "num_workers": ">=0",
        "max_n_fraction": "[0, 1]",
        "split_fractions": "[0, 1]",
    }

    def __init__(
        self,
        batch_size: int,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        self.trainer = None
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size if eval_batch_size is not None else batch_size
        self.num_workers = num_workers
        self.seed = seed

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [hook for hook in LOADER_HOOKS if hook in vars(cls)]
        if own:
            raise TypeError(
                f"{cls.__name__} defines {', '.join(own)}: a genodiff data module returns its "
                "datasets from dataset_of(split) and genodiff.data.base.DataModule builds the "
                "loaders (which split every global batch over the processes of a DDP run)"
            )
        lightning_only = [hook for hook in LIGHTNING_ONLY_HOOKS if hook in vars(cls)]
        if lightning_only:
            raise TypeError(
                f"{cls.__name__} defines {', '.join(lightning_only)}: a genodiff data module "
                "is no LightningDataModule and Lightning never calls these on it; do that "
                "work in setup(stage) or dataset_of(split)"
            )

    @abstractmethod
    def check_files(self) -> None:
        """Raise FileNotFoundError naming any missing input (and how to get it)."""

    def setup(self, stage: str | None = None) -> None:  # noqa: B027 (optional: a no-op here)
        """Build the datasets of ``stage`` ("fit", "validate" or "test"; None: every split)
        ahead of the loaders; nothing here (``dataset_of`` builds a split on first use)."""

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs of this module beyond the train loader's position (which
        the loader records itself), saved in the training checkpoints unless empty; nothing
        here."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 (a no-op here)
        """Take back ``state_dict()``'s value from the checkpoint a run resumes from."""

    def attach_tokenizer(self, tokenizer: Tokenizer) -> None:
        """Use ``tokenizer`` for every dataset; ValueError when its domain is not ours."""
        if tokenizer.domain != self.domain:
            raise InputValueError(
                f"{type(self).__name__} reads {self.domain} but the tokenizer "
                f"{tokenizer.name!r} is for {tokenizer.domain}; pick a matching tokenizer.name"
            )
        self.tokenizer = tokenizer

    def data_files(self) -> list[Path]:
        """The files the training data is read from, hashed into every checkpoint
        (``genodiff info`` shows the digest); [] when the data is not a set of local files."""
        return []

    def class_names(self) -> list[str] | None:
        """The classes a labelled module's items are labelled with (item ``"labels"`` ids
        index this list; ``genodiff train`` then trains a class-conditional model, see
        ``genodiff.conditioning``); None for unlabelled data."""
        return None

    def window_texts(self, split: str) -> list[str]:
        """The text of every window of ``split`` ("train", "valid" or "test") as training cuts
        it (genome data: the bases, upper case, no reverse complement): the real sequences
        ``Model.windows`` compares samples with. A module whose windows have no such text
        (the default) refuses."""
        raise InputValueError(
            f"{type(self).__name__} gives no text of its windows to compare samples with; "
            "give real sequences of your own",
            parameter="split",
        )

    def window_texts_by_class(self, split: str) -> dict[str, list[str]]:
        """A labelled module's ``window_texts``, by class name."""
        raise InputValueError(
            f"{type(self).__name__} holds unlabelled data: its windows have no classes",
            parameter="split",
        )

    def class_counts(self, split: str) -> list[int]:
        """A labelled module's number of items of each class in ``split``."""
        raise InputValueError(f"{type(self).__name__} holds unlabelled data: no class counts")

    def training_texts(self) -> Iterable[str]:
        """The training split's raw texts, for a tokenizer trained on the data."""
        raise InputValueError(f"{type(self).__name__} has no text to train a tokenizer on")

    @abstractmethod
    def dataset_of(self, split: str) -> NamedItemDataset:
        """The dataset of ``split`` ("train", "valid" or "test") that the loaders read, built
        on first use; ValueError naming the fix when it is empty. A train dataset with a
        ``set_epoch(epoch)`` method is told each epoch (new augmentation coins, say)."""

    @abstractmethod
    def heldout_dataset(self, split: str = "test") -> NamedItemDataset:
        """The ``split`` ("valid" or "test") dataset of the configured data."""

    @abstractmethod
    def file_dataset(self, path: str | Path) -> NamedItemDataset:
        """Every window of the file ``path`` (``genodiff eval --file FILE``), with the
        configured window length."""

    def end_samples(self, samples: torch.Tensor, given: torch.Tensor | None = None) -> torch.Tensor:
        """Generated windows (n, L) ended as this module's windows end, before they are
        decoded: unchanged here (a window runs to its last position). A module whose windows
        each hold one sequence and then padding (the text plugin's padded sentences) pads
        every position after a sample's end. ``given`` (L,) marks the positions the user fixed
        (a prefix, an infilling template's known tokens; None: none): no sample ends before
        the last of them, whatever was drawn before it."""
        return samples

    def training_overlap(
        self, dataset: NamedItemDataset, indices: Sequence[int]
    ) -> list[bool] | None:
        """Whether each of the items ``indices`` of ``dataset`` (windows that ``file_dataset``
        read from a file holding this module's training data) overlaps an item of the train
        split (``genodiff eval --file`` warns that such a number is not held out); None when
        this module cannot tell (the default)."""
        return None

    def sequences_dataset(self, sequences: Sequence[str]) -> NamedItemDataset:
        """One item per sequence given in memory, read as ``file_dataset`` reads one window
        of a file (``genodiff.Model.score``). A data module that cannot (the default) refuses
        with an InputValueError; the built-in ones and the text plugin's can."""
        raise InputValueError(
            f"{type(self).__name__} cannot read sequences given in memory; write them to a file "
            "and score its windows (evaluate_checkpoint's data_file)"
        )

    # ------------------------------------------------------------------ loaders

    def _loader(
        self, dataset: Any, batch_size: int, cls: type[DataLoader] = DataLoader, **kwargs: Any
    ) -> DataLoader:
        return cls(
            dataset,
            batch_size=batch_size,
            num_workers=self.num_workers,
            worker_init_fn=seed_worker,
            generator=torch.Generator().manual_seed(self.seed),
            persistent_workers=False,  # workers must see each epoch's set_epoch
            **kwargs,
        )

    def train_dataloader(self) -> DataLoader:
        """This process's share of a permutation per epoch (a global batch is ``world_size x
        batch_size`` consecutive items; the tail that fills no global batch is left out on
        several processes), checkpointed so that a resumed run goes on mid-epoch."""
        dataset = self.dataset_of("train")
        rank, world = process_share(self.trainer)
        self.check_batch_size(world)
        sampler = EpochShuffleSampler(dataset, self.seed, self.batch_size, rank, world)
        position = partial(self._train_position, sampler)
        return self._loader(
            dataset, self.batch_size, ResumableLoader, sampler=sampler, position=position
        )

    def check_batch_size(self, world_size: int = 1) -> None:
        """ValueError when the train split holds fewer items than one global batch
        (``world_size`` processes x ``batch_size``): every step would see the whole split, or
        a data-parallel run none. Builds the train dataset (a tokenizer must be attached)."""
        items = len(self.dataset_of("train"))
        if items >= world_size * self.batch_size:
            return
        processes = f"{world_size} processes x " if world_size > 1 else ""
        raise InputValueError(
            f"the train split has {items} windows, fewer than one batch of {processes}"
            f"data.batch_size={self.batch_size}; set data.batch_size to at most "
            f"{max(items // world_size, 1)}"
        )

    def _train_position(self, sampler: EpochShuffleSampler) -> dict[str, int]:
        """Where training stands in the data (``train_position``; the trainer is attached
        after the loader is built)."""
        return train_position(self.trainer, sampler)

    def _heldout_loader(self, split: str) -> DataLoader:
        """Every item once over the processes; the last global batch is filled with all-[PAD]
        rows, which the held-out metrics leave out (``HeldoutShard``)."""
        dataset = self.dataset_of(split)
        rank, world = process_share(self.trainer)
        if world > 1:
            pad_id = self.tokenizer.pad_id
            dataset = HeldoutShard(dataset, self.eval_batch_size, rank, world, pad_id)
        return self._loader(dataset, self.eval_batch_size)

    def val_dataloader(self) -> DataLoader:
        return self._heldout_loader("valid")

    def test_dataloader(self) -> DataLoader:
        return self._heldout_loader("test")


def files_digest(paths: Iterable[Path], chunk_bytes: int = 1 << 24) -> str:
    """``sha256:<hex>`` over the SHA-256 of each file's bytes, in order: the digest changes when
    any byte of any file changes, not when the files are moved or touched."""
    digest = hashlib.sha256()
    for path in paths:
        per_file = hashlib.sha256()
        with open(path, "rb") as stream:
            while chunk := stream.read(chunk_bytes):
                per_file.update(chunk)
        digest.update(per_file.digest())
    return f"sha256:{digest.hexdigest()}"
