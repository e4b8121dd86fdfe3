"""The data-module contract: what the core asks of a data module, built-in or plugin.

A data module is a ``LightningDataModule`` whose constructor keywords are the ``data:`` config
keys. Plugins register theirs through the ``genodiff.data`` entry-point group. The core calls,
in order: ``check_files()`` (fail fast on missing input), ``training_texts()`` (only for a
tokenizer that is trained on the data), ``attach_tokenizer(tokenizer)``, then Lightning's
``setup`` and loaders. ``genodiff eval`` uses ``heldout_dataset()`` and ``file_dataset()``.

Datasets yield ``{"input_ids": LongTensor[L]}`` items ([PAD] is never corrupted nor scored)
and name each item with ``item_name(index)`` (a genome window ``chr:start-end``, a text block
``line 12``), which the evaluation digest hashes together with the ids.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar, Protocol

import lightning as L
import torch

from genodiff.tokenizers import Tokenizer


class NamedItemDataset(Protocol):
    """A dataset of fixed-length id sequences whose items have names."""

    max_length: int

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]: ...

    def item_name(self, index: int) -> str: ...


class DataModule(L.LightningDataModule, ABC):
    """Base of every genodiff data module. ``domain`` is the tokenizer domain it takes
    (``genodiff.domains``: ``"dna"`` for the built-in modules)."""

    domain: ClassVar[str]
    #: The ``data:`` keys naming the files or folders the data are read from, in order
    #: (``genodiff info`` and ``genodiff eval`` report them).
    data_file_keys: ClassVar[tuple[str, ...]] = ()
    #: Every ``data:`` key holding a path (the data files, a cache folder, ...): a relative
    #: one is resolved against the project root when a config is loaded.
    path_keys: ClassVar[tuple[str, ...]] = ()
    tokenizer: Tokenizer
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

    @abstractmethod
    def check_files(self) -> None:
        """Raise FileNotFoundError naming any missing input (and how to get it)."""

    def attach_tokenizer(self, tokenizer: Tokenizer) -> None:
        """Use ``tokenizer`` for every dataset; ValueError when its domain is not ours."""
        if tokenizer.domain != self.domain:
            raise ValueError(
                f"{type(self).__name__} reads {self.domain} but the tokenizer "
                f"{tokenizer.name!r} is for {tokenizer.domain}; pick a matching tokenizer.name"
            )
        self.tokenizer = tokenizer

    def data_files(self) -> list[Path]:
        """The files the training data is read from, hashed into every checkpoint
        (``genodiff info`` shows the digest); [] when the data is not a set of local files."""
        return []

    def training_texts(self) -> Iterable[str]:
        """The training split's raw texts, for a tokenizer trained on the data."""
        raise ValueError(f"{type(self).__name__} has no text to train a tokenizer on")

    @abstractmethod
    def heldout_dataset(self, split: str = "test") -> NamedItemDataset:
        """The ``split`` ("valid" or "test") dataset of the configured data."""

    @abstractmethod
    def file_dataset(self, path: str | Path) -> NamedItemDataset:
        """Every window of the file ``path`` (``genodiff eval --file FILE``), with the
        configured window length."""


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
