"""Does a file hold a run's training data, and which of its windows did the run train on?

``genodiff eval --file FILE`` scores every window of FILE. When FILE is one of the files the
checkpoint's data module read for training (the same path, or the same bytes: the checkpoint
records the SHA-256 digest of its training files, ``genodiff.data.base.files_digest``), the
windows that overlap the train split (as the run's ``data:`` settings cut it:
``split_fractions``, ``max_length``, ...) were trained on, and the number is not a held-out
likelihood. ``training_overlap`` says how many.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genodiff import registry
from genodiff.data.base import DataModule, NamedItemDataset, files_digest
from genodiff.data.build import build_datamodule
from genodiff.data.training_files import content_sha256
from genodiff.resources import resource
from genodiff.tokenizers import Tokenizer


@dataclass
class TrainingOverlap:
    """``data_file`` is the training data (``matched_by``: "path" or "content"), and
    ``overlapping`` of the ``windows`` scored overlap a train window (None: the data module
    cannot tell)."""

    data_file: str
    matched_by: str
    overlapping: int | None
    windows: int

    @property
    def overlaps(self) -> bool | None:
        """Whether any scored window overlaps the train split (None: cannot tell)."""
        return None if self.overlapping is None else self.overlapping > 0

    @property
    def share(self) -> float | None:
        """The share of the scored windows that overlap the train split (None: cannot tell)."""
        return None if self.overlapping is None else self.overlapping / self.windows

    def warning(self) -> str:
        """The warning ``genodiff eval`` prints."""
        if self.share is None:
            which = "this data module cannot tell which of its windows were trained on"
        else:
            which = (
                f"{self.share:.0%} of the scored windows ({self.overlapping} of {self.windows}) "
                "overlap the train split"
            )
        same = "the same file" if self.matched_by == "path" else "the same bytes"
        return (
            f"{self.data_file} is this checkpoint's training data ({same}) and {which}: the "
            "number is not a held-out likelihood. For a held-out one, score the run's own test "
            "split (no file given) or a file the run never trained on"
        )


def training_overlap(
    data_config: dict[str, Any],
    tokenizer: Tokenizer,
    recorded_digest: str | None,
    data_file: str | os.PathLike,
    dataset: NamedItemDataset,
    indices: list[int],
    records: list[dict[str, Any]] | None = None,
) -> TrainingOverlap | None:
    """How the windows ``indices`` of ``dataset`` (read from ``data_file``) overlap the
    training data of a run with ``data_config``, whose checkpoint recorded
    ``recorded_digest`` and, by file, ``records`` (``genodiff.data.training_files``); None
    when ``data_file`` is not one of its training files. A key that maps entries to files
    (``fasta_by_label``) is matched entry by entry: ``data_file`` is then read as that
    entry's file alone."""
    trained = build_datamodule(data_config).data_files()
    recorded = {(r.get("key"), r.get("entry")): r for r in records or ()}
    for key in registry.get("data", data_config["name"]).data_file_keys:
        value = data_config.get(key)
        if isinstance(value, Mapping):
            for entry, path in value.items():
                matched_by = _entry_matched_by(data_file, path, recorded.get((key, entry), {}))
                if matched_by is not None:
                    candidate = build_datamodule({**data_config, key: {entry: str(data_file)}})
                    return _overlap(candidate, tokenizer, data_file, matched_by, dataset, indices)
            continue
        if not isinstance(value, str | os.PathLike) or Path(value) not in trained:
            continue  # a key naming no training file (a folder, unset)
        candidate = build_datamodule({**data_config, key: str(data_file)})
        matched_by = _matched_by(candidate, trained, recorded_digest)
        if matched_by is not None:
            return _overlap(candidate, tokenizer, data_file, matched_by, dataset, indices)
    return None


def _overlap(
    candidate: DataModule,
    tokenizer: Tokenizer,
    data_file: str | os.PathLike,
    matched_by: str,
    dataset: NamedItemDataset,
    indices: list[int],
) -> TrainingOverlap:
    """The ``TrainingOverlap`` of the windows ``indices`` of ``dataset`` with the train split
    of ``candidate``, the run's data module reading ``data_file`` in its training file's place."""
    candidate.attach_tokenizer(tokenizer)
    flags = candidate.training_overlap(dataset, indices)
    overlapping = None if flags is None else sum(flags)
    return TrainingOverlap(str(data_file), matched_by, overlapping, len(indices))


def _entry_matched_by(
    data_file: str | os.PathLike, trained: str | os.PathLike, record: Mapping[str, Any]
) -> str | None:
    """How ``data_file`` is the training file ``trained`` (an entry of a mapping key): "path"
    when it is that file (a relative path: the file genodiff ships there), "content" when its
    content has the sha256 the model recorded for it (``record``); else None."""
    place = Path(trained) if Path(trained).is_absolute() else resource(str(trained))
    if place.is_file() and place.resolve() == Path(data_file).resolve():
        return "path"
    sha = record.get("content_sha256")
    if sha is not None and Path(data_file).is_file() and content_sha256(data_file) == sha:
        return "content"
    return None


def _matched_by(
    candidate: DataModule, trained: list[Path], recorded_digest: str | None
) -> str | None:
    """How ``candidate``'s files are the training files: "path" when they are those ``trained``
    names (absolute paths: a portable export names its files relative to no folder of this
    machine, genodiff.data.training_files), "content" when they have the training files'
    ``recorded_digest``; else None."""
    files = candidate.data_files()
    by_path = all(p.is_absolute() for p in trained)
    if by_path and [p.resolve() for p in files] == [p.resolve() for p in trained]:
        return "path"
    readable = recorded_digest is not None and all(p.is_file() for p in files)
    if readable and files_digest(files) == recorded_digest:
        return "content"
    return None
