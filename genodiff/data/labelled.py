"""Labelled DNA sequences for class-conditional training: the ``labelled`` data module.

Items are ``{"input_ids": (L,), "labels": ()}``; ``labels`` is the class id, an index into
``class_names()``, which ``genodiff train`` stores with the run (``conditioning.labels``, see
``genodiff.conditioning``). Two sources, exactly one per config:

- **A Genomic Benchmarks folder** (``root``, ``task``): ``<root>/<task>/{train,test}/<class>/
  *.txt``, one sequence per file, read by the fine-tuning reader
  (``genodiff.data.benchmarks.load_task``: classes in sorted folder order, sequences cut to
  ``max_length`` and left-padded with [PAD], which is never corrupted nor scored). The
  validation split is carved from train: ``valid_fraction`` of each class, drawn with ``seed``
  (at least one sequence of every class that has two), so every class is in every split.
- **Labelled FASTA** (``fasta_by_label: {class: path}``): one FASTA per class (plain or BGZF,
  as the ``fasta`` module reads), windowed as ``data=demo`` windows a genome
  (``genodiff.data.windows``): each record cut by position into train | valid | test regions
  (``split_fractions``), tiled by non-overlapping ``max_length`` windows, so no window, and no
  pair of neighbouring windows, crosses a split. Classes come in the mapping's order. A class
  too short to have a window in a split is named in the class-count report
  (``class_count_lines``) rather than silently missing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from genodiff.data.base import DataModule
from genodiff.data.datamodule import FILE_MAX_N_FRACTION, open_genome
from genodiff.data.windows import SPLITS, FastaWindowDataset, SequenceDataset, check_split
from genodiff.errors import InputValueError, require_regular_file
from genodiff.registry import register_data
from genodiff.tokenizers import DNATokenizer


class LabelledDataset(Dataset):
    """Labelled items of one split: ``labels`` (N,) int64 class ids, ``item_name(i)``."""

    labels: np.ndarray
    max_length: int


class LabelledSequences(LabelledDataset):
    """Fixed-length id rows with a label each: ``ids`` (N, L), ``labels`` (N,), ``names``."""

    def __init__(self, ids: torch.Tensor, labels: np.ndarray, names: list[str]) -> None:
        self.ids = ids  # (N, L)
        self.labels = labels  # (N,)
        self.names = names
        self.max_length = int(ids.shape[1])

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[index].long(),  # (L,)
            "labels": torch.tensor(int(self.labels[index])),  # ()
        }

    def item_name(self, index: int) -> str:
        return self.names[index]


class LabelledWindows(LabelledDataset):
    """The windows of one FASTA per class, one after the other: class ``c``'s are
    ``windows[c]``; an item is named ``class|chrom:start-end``."""

    def __init__(self, windows: Sequence[FastaWindowDataset], class_names: list[str]) -> None:
        self.windows = list(windows)
        self.class_names = class_names
        sizes = [len(w) for w in self.windows]
        self.labels = np.repeat(np.arange(len(sizes)), sizes)  # (N,)
        self.starts = np.concatenate([[0], np.cumsum(sizes)])  # (C + 1,)
        self.max_length = self.windows[0].max_length

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _locate(self, index: int) -> tuple[int, int]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} windows")
        label = int(self.labels[index])
        return label, index - int(self.starts[label])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        label, local = self._locate(index)
        return {**self.windows[label][local], "labels": torch.tensor(label)}

    def item_name(self, index: int) -> str:
        label, local = self._locate(index)
        return f"{self.class_names[label]}|{self.windows[label].item_name(local)}"

    def window(self, index: int) -> tuple[str, str, int, int]:
        """(class, chrom, start, end) of item ``index``."""
        label, local = self._locate(index)
        return (self.class_names[label], *self.windows[label].window(local))

    def bases(self, index: int) -> str:
        """The bases of item ``index`` as its class's FASTA holds them (forward strand, case
        as stored, N kept)."""
        label, local = self._locate(index)
        windows = self.windows[label]
        return windows.genome.fetch(*windows.window(local))

    def set_epoch(self, epoch: int) -> None:
        """New reverse-complement coins for ``epoch`` in every class."""
        for windows in self.windows:
            windows.set_epoch(epoch)


def stratified_holdout(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """(N,) bool: the rows held out, ``fraction`` of each class (rounded, at least one of every
    class with two or more rows, never all of a class), drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    held = np.zeros(len(labels), dtype=bool)
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        count = min(max(round(fraction * len(rows)), 1), len(rows) - 1) if fraction > 0 else 0
        held[rng.permutation(rows)[:count]] = True
    return held


@register_data("labelled")
class LabelledDataModule(DataModule):
    """Labelled sequences: a Genomic Benchmarks folder (``root`` + ``task``) or one FASTA
    per class (``fasta_by_label``); see the module docstring.

    ``max_length``: the sequence length (Genomic Benchmarks: None takes the task's length, see
    ``genodiff.data.benchmarks.load_task``; FASTA: the window length, required).
    ``valid_fraction`` (benchmarks) and ``split_fractions`` (FASTA) make the validation
    split; ``rc_aug`` flips a coin per training window (FASTA; benchmark files are used as
    they are).
    """

    domain = DNATokenizer.domain
    data_file_keys = ("root", "fasta_by_label")
    path_keys = ("root", "fasta_by_label", "cache_dir")
    config_ranges = {"valid_fraction": "[0, 1)"}

    def __init__(
        self,
        root: str | None = None,
        task: str | None = None,
        fasta_by_label: Mapping[str, str] | None = None,
        max_length: int | None = None,
        valid_fraction: float = 0.1,
        split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
        max_n_fraction: float = 0.5,
        rc_aug: bool = True,
        download: bool = False,
        batch_size: int = 16,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(batch_size, eval_batch_size, num_workers, seed)
        benchmark = root is not None or task is not None
        if benchmark == (fasta_by_label is not None):
            raise InputValueError(
                "data.name=labelled reads either a Genomic Benchmarks folder (data.root and "
                "data.task) or one FASTA per class (data.fasta_by_label: {class: path}); "
                "give exactly one of the two"
            )
        if benchmark and (root is None or task is None):
            raise InputValueError("a Genomic Benchmarks folder needs both data.root and data.task")
        if fasta_by_label is not None:
            if not fasta_by_label:
                raise InputValueError("data.fasta_by_label is empty: name one FASTA per class")
            if max_length is None:
                raise InputValueError(
                    "data.fasta_by_label needs data.max_length: the window length"
                )
        self.root, self.task = root, task
        self.fasta_by_label = (
            None
            if fasta_by_label is None
            else {str(name): Path(path) for name, path in fasta_by_label.items()}
        )
        self.max_length = max_length
        self.valid_fraction = valid_fraction
        self.split_fractions = tuple(split_fractions)
        self.max_n_fraction = max_n_fraction
        self.rc_aug = rc_aug
        self.download = download
        self.cache_dir = cache_dir
        self.tokenizer = DNATokenizer()
        self.datasets: dict[str, LabelledDataset] = {}
        self._task: Any = None  # the benchmark task once read (genodiff.data.benchmarks.TaskData)

    # ------------------------------------------------------------------ the contract

    def check_files(self) -> None:
        if self.fasta_by_label is None:
            self._benchmark()  # reads the task: a missing or malformed folder fails here
            return
        for name, path in self.fasta_by_label.items():
            what = f"FASTA file of class {name!r}"
            missing = f"{what} not found: {path} (data.fasta_by_label)"
            require_regular_file(path, f"{what} (data.fasta_by_label)", missing=missing)
            open_genome(path, self.cache_dir)

    def data_files(self) -> list[Path]:
        if self.fasta_by_label is not None:
            return list(self.fasta_by_label.values())
        task = Path(self.root) / self.task
        return sorted(task.glob("*/*/*.txt"))

    def class_names(self) -> list[str]:
        if self.fasta_by_label is not None:
            return list(self.fasta_by_label)
        return list(self._benchmark().classes)

    def class_counts(self, split: str) -> list[int]:
        labels = self._split(split).labels
        return np.bincount(labels, minlength=len(self.class_names())).tolist()

    def dataset_of(self, split: str) -> LabelledDataset:
        dataset = self._split(split)
        if len(dataset) == 0:
            raise InputValueError(
                f"the {split} split has no labelled sequences; use a smaller data.max_length "
                "or more data per class"
            )
        return dataset

    def heldout_dataset(self, split: str = "test") -> LabelledDataset:
        return self._split(split)

    def window_bases(self, dataset: LabelledDataset, index: int) -> str:
        """The bases of item ``index`` of one of this module's splits, upper case: a FASTA
        window as its class's file holds it, a benchmark sequence as its file holds it."""
        if isinstance(dataset, LabelledWindows):
            return dataset.bases(index).upper()
        return (Path(self.root) / self.task / dataset.item_name(index)).read_text().strip().upper()

    def window_texts(self, split: str) -> list[str]:
        """The bases of every sequence of ``split``, every class's, in the split's order."""
        dataset = self.heldout_dataset(split)
        return [self.window_bases(dataset, index) for index in range(len(dataset))]

    def window_texts_by_class(self, split: str) -> dict[str, list[str]]:
        """``window_texts`` by class name, each class's in the split's order."""
        dataset = self.heldout_dataset(split)
        texts: dict[str, list[str]] = {name: [] for name in self.class_names()}
        names = list(texts)
        for index, label in enumerate(dataset.labels):
            texts[names[int(label)]].append(self.window_bases(dataset, index))
        return texts

    def file_dataset(self, path: str | os.PathLike) -> FastaWindowDataset:
        """Every window of a FASTA (unlabelled), as the ``fasta`` module reads a file."""
        return FastaWindowDataset(
            path,
            "test",
            max_length=self.max_length or 1024,
            split_fractions=(0.0, 0.0, 1.0),
            max_n_fraction=FILE_MAX_N_FRACTION,
            tokenizer=self.tokenizer,
        )

    def training_overlap(
        self, dataset: FastaWindowDataset, indices: Sequence[int]
    ) -> list[bool] | None:
        """Whether each window ``indices`` of ``dataset`` (``file_dataset``'s, of a file holding
        one class's training FASTA) shares a base with a train window of a module of that one
        class (``genodiff.data.overlap``); None for several classes or a benchmark folder."""
        if self.fasta_by_label is None or len(self.fasta_by_label) != 1:
            return None
        (windows,) = self._split("train").windows  # the one class's train windows
        trained = windows.coverage()
        return [trained.overlaps(*dataset.window(i)) for i in indices]

    def sequences_dataset(self, sequences: Sequence[str]) -> SequenceDataset:
        """Each sequence whole, unlabelled, as the ``fasta`` module reads it."""
        return SequenceDataset(sequences, self.tokenizer, add_eos=False)

    # ------------------------------------------------------------------ the splits

    def _split(self, split: str) -> LabelledDataset:
        check_split(split)
        if split not in self.datasets:
            self.datasets.update(
                self._fasta_split(split)
                if self.fasta_by_label is not None
                else self._benchmark_splits()
            )
        return self.datasets[split]

    def _benchmark(self) -> Any:
        """The benchmark task (``TaskData``), read once."""
        # Imported here: the fine-tuning package imports the training stack, which imports
        # this package's data modules.
        from genodiff.data.benchmarks import load_task

        if self._task is None:
            self._task = load_task(
                self.root, self.task, self.max_length, self.download, section="data"
            )
        return self._task

    def _benchmark_splits(self) -> dict[str, LabelledSequences]:
        task = self._benchmark()
        root = Path(self.root) / self.task
        train_labels = task.train.labels.numpy()
        held = stratified_holdout(train_labels, self.valid_fraction, self.seed)

        def part(split: Any, rows: np.ndarray) -> LabelledSequences:
            names = [Path(split.files[i]).relative_to(root).as_posix() for i in rows]
            return LabelledSequences(split.ids[rows], split.labels.numpy()[rows], names)

        return {
            "train": part(task.train, np.flatnonzero(~held)),
            "valid": part(task.train, np.flatnonzero(held)),
            "test": part(task.test, np.arange(len(task.test))),
        }

    def _fasta_split(self, split: str) -> dict[str, LabelledWindows]:
        windows = [
            FastaWindowDataset(
                path,
                split,
                max_length=self.max_length,
                split_fractions=self.split_fractions,
                max_n_fraction=self.max_n_fraction,
                rc_aug=self.rc_aug and split == "train",
                seed=self.seed,
                cache_dir=self.cache_dir,
                tokenizer=self.tokenizer,
            )
            for path in self.fasta_by_label.values()
        ]
        return {split: LabelledWindows(windows, self.class_names())}


def class_count_lines(datamodule: DataModule) -> list[str]:
    """One line per class: its sequences in each split, and a warning for a class that has
    none in some split (its FASTA is too short for the window length, say)."""
    names = datamodule.class_names()
    counts = {split: datamodule.class_counts(split) for split in SPLITS}
    width = max(len(name) for name in names)
    lines = []
    for label, name in enumerate(names):
        parts = ", ".join(f"{split} {counts[split][label]:,}" for split in SPLITS)
        missing = [split for split in SPLITS if counts[split][label] == 0]
        warning = f"  WARNING: no sequence in {', '.join(missing)}" if missing else ""
        lines.append(f"genodiff: class {label} {name:<{width}}  {parts}{warning}")
    return lines
