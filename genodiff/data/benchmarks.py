"""Genomic Benchmarks tasks on disk: ``<root>/<task>/{train,test}/<class>/*.txt``.

Every ``.txt`` file holds one DNA sequence (surrounding whitespace is ignored). Class ids are
the class folder names in sorted (Unicode code point) order, 0, 1, ...; the list is written
with the results so a prediction can be mapped back to a folder. Sequences are tokenized with
``DNATokenizer`` and cut to ``max_length`` by keeping the first ``max_length`` bases, then
LEFT-padded with ``[PAD]`` (id 4) to ``max_length``.
"""

from __future__ import annotations

import codecs
import difflib
import errno
import http.client
import importlib
import shutil
import socket
import urllib.error
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from genodiff.atomic_files import disk_full_error, replace_folder, temporary_path
from genodiff.data.download import DownloadError
from genodiff.errors import InputFileNotFoundError, InputValueError, require_regular_file
from genodiff.tokenizers import DNATokenizer
from genodiff.tokenizers.base import id_dtype

SPLITS = ("train", "test")
# The 8 Genomic Benchmarks and the lengths the Caduceus / MDLM papers use (docs/architecture.md §8).
TASK_MAX_LENGTH = {
    "dummy_mouse_enhancers_ensembl": 1024,
    "demo_coding_vs_intergenomic_seqs": 200,
    "demo_human_or_worm": 200,
    "human_enhancers_cohn": 500,
    "human_enhancers_ensembl": 512,
    "human_ensembl_regulatory": 512,
    "human_nontata_promoters": 251,
    "human_ocr_ensembl": 512,
}
GENOMIC_BENCHMARKS = tuple(TASK_MAX_LENGTH)
# Seconds a socket of the genomic-benchmarks download waits for the server (the package sets
# no timeout: a server that stops answering would hang the run).
TASK_DOWNLOAD_TIMEOUT = 60.0
# What the package's transfer raises when the network or the archive fails: urllib's and
# requests' errors (OSError: URLError, HTTPError, ContentTooShortError, timeouts, refused or
# reset connections), a body cut short (IncompleteRead), a zip that does not unpack
# (shutil.ReadError is an OSError; BadZipFile, a truncated or damaged member).
TASK_DOWNLOAD_FAILURES = (
    OSError,
    http.client.HTTPException,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
)


@dataclass
class Split:
    """One split of a task: ``ids`` (N, max_length) token ids (the smallest dtype that holds
    the vocabulary, see ``id_dtype``), ``labels`` (N,) int64."""

    ids: torch.Tensor
    labels: torch.Tensor
    files: list[str]

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class TaskData:
    name: str
    classes: list[str]  # class id -> folder name
    max_length: int
    train: Split
    test: Split
    tokenizer: DNATokenizer  # what the ids are encoded with


def task_dir(root: str | Path, task: str, download: bool, section: str = "benchmark") -> Path:
    """``root/task``; fetched with the genomic-benchmarks package when missing and allowed. A
    missing task's message names the keys ``root`` and ``download`` of the config ``section``
    they came from (``benchmark``: fine-tuning; ``data``: the labelled data of a classifier)."""
    folder = Path(root) / task
    if folder.is_dir():
        return folder
    if download:
        try:
            loc2seq = importlib.import_module("genomic_benchmarks.loc2seq")
        except ImportError:
            loc2seq = None
        if loc2seq is not None:
            print(f"genodiff: downloading {task} with genomic-benchmarks into {root}")
            _fetch_task(loc2seq, folder)
            if folder.is_dir():
                return folder
            raise InputFileNotFoundError(
                f"genomic-benchmarks did not create {folder} for task {task!r}; check the task "
                f"name (the {len(GENOMIC_BENCHMARKS)} benchmarks: {', '.join(GENOMIC_BENCHMARKS)})"
            )
    hint = (
        f"`pip install genomic-benchmarks` to download it at run time ({section}.download=true)"
        if download
        else f"set {section}.download=true with the genomic-benchmarks package installed"
    )
    raise InputFileNotFoundError(
        f"task {task!r} not found: no folder {folder}{_meant_task(root, task)}. Put it there "
        f"in the layout <root>/<task>/{{train,test}}/<class>/*.txt, point {section}.root at "
        f"it, or {hint}"
    )


def _meant_task(root: str | Path, task: str) -> str:
    """`` (did you mean 'NAME'?)`` for the task folders under ``root`` and the Genomic
    Benchmarks spelled close to ``task`` (a mistyped name); "" when none is."""
    root = Path(root)
    try:
        folders = (
            [entry.name for entry in root.iterdir() if entry.is_dir()] if root.is_dir() else []
        )
    except OSError:  # an unreadable root: the names it holds are not known
        folders = []
    names = sorted({*folders, *GENOMIC_BENCHMARKS} - {task})
    close = difflib.get_close_matches(task, names, n=3, cutoff=0.8)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def _fetch_task(loc2seq: ModuleType, folder: Path) -> None:
    """The task ``folder.name`` fetched with genomic-benchmarks' ``loc2seq`` into a hidden
    folder beside ``folder`` (``.NAME.PID.tmp``) and renamed to ``folder`` once whole: the
    package writes a task file by file, so a download that fails or is interrupted would
    otherwise leave part of it where the next run takes it for the whole task."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = temporary_path(folder)
    shutil.rmtree(staging, ignore_errors=True)  # left by a killed run whose pid was this one
    try:
        _download_with_the_package(loc2seq, folder, staging)
        if (staging / folder.name).is_dir():
            replace_folder(staging / folder.name, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _download_with_the_package(loc2seq: ModuleType, folder: Path, staging: Path) -> None:
    """The package's ``download_dataset`` of the task ``folder.name`` into ``staging``; its
    network and archive failures one line (``DownloadError``; a full disk ``DiskFullError``)
    naming the task, the reason and what to do."""
    try:
        with _socket_timeout(TASK_DOWNLOAD_TIMEOUT):
            loc2seq.download_dataset(folder.name, version=0, dest_path=str(staging))
    except TASK_DOWNLOAD_FAILURES as err:
        if isinstance(err, PermissionError) or getattr(err, "errno", None) == errno.EROFS:
            raise  # the folder, not the download: said as it is, naming the path
        shutil.rmtree(staging, ignore_errors=True)  # the free space is said without the part
        kept = f"no part of the task {folder.name!r} is kept"
        known = folder.name in GENOMIC_BENCHMARKS
        names = f"the {len(GENOMIC_BENCHMARKS)}: {', '.join(GENOMIC_BENCHMARKS)}"
        again = "run again" if known else f"check the name ({names})"
        raise disk_full_error(err, staging, kept=kept) or DownloadError(
            f"genomic-benchmarks could not download the Genomic Benchmarks task "
            f"{folder.name!r} ({_failure_reason(err)}); no part of it is kept: {again}, or "
            f"download it yourself and put it at {folder} as {{train,test}}/<class>/*.txt "
            "(docs/genomic_benchmarks.md)"
        ) from err


@contextmanager
def _socket_timeout(seconds: float) -> Iterator[None]:
    """Sockets made in the block without a timeout of their own give up after ``seconds``
    without data, unless the process set a default timeout itself (kept then)."""
    previous = socket.getdefaulttimeout()
    if previous is None:
        socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _failure_reason(err: BaseException) -> str:
    """What went wrong in ``err``, on one line: an HTTP error with its URL, urllib's reason
    without its ``<urlopen error ...>`` wrapping, else the message, else the error's kind."""
    if isinstance(err, urllib.error.HTTPError):
        return f"{err} at {err.url}"
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, TimeoutError):
        return "timed out waiting for the server"
    return " ".join(str(reason).split()) or type(reason).__name__


def _class_dirs(split_dir: Path) -> dict[str, Path]:
    if not split_dir.is_dir():
        raise InputFileNotFoundError(
            f"{split_dir} is missing: a task folder needs train/ and test/, each with one "
            "sub-folder of .txt files per class"
        )
    dirs = {d.name: d for d in sorted(split_dir.iterdir()) if d.is_dir()}
    if not dirs:
        raise InputValueError(
            f"{split_dir} has no class folders; expected {split_dir}/<class>/*.txt"
        )
    return dirs


def task_layout(
    root: str | Path, task: str, download: bool, section: str = "benchmark"
) -> tuple[Path, list[str]]:
    """The folder of ``task`` and its classes (sorted folder names), checked without reading a
    sequence: train/ and test/ hold the same class folders, at least two (``section``:
    ``task_dir``'s)."""
    folder = task_dir(root, task, download, section)
    train_classes, test_classes = (list(_class_dirs(folder / s)) for s in SPLITS)
    if train_classes != test_classes:
        raise InputValueError(
            f"task {task!r}: train classes {', '.join(train_classes) or '(none)'} differ from "
            f"test classes {', '.join(test_classes) or '(none)'}; both splits need the same "
            "class folders"
        )
    if len(train_classes) < 2:
        raise InputValueError(
            f"task {task!r} has {len(train_classes)} class ({', '.join(train_classes)}): a "
            f"classification task needs at least two classes, one sub-folder of .txt files "
            f"each under {folder / 'train'} and {folder / 'test'}"
        )
    return folder, train_classes


def class_files(split_dir: Path, classes: list[str]) -> list[list[Path]]:
    """The sequence files of each class in ``split_dir``, in order; ValueError for a class
    without any, and an input error for a ``.txt`` that is no file (a folder, a broken link)."""
    files = [
        [require_regular_file(path, "sequence file") for path in sorted(folder.glob("*.txt"))]
        for folder in (split_dir / name for name in classes)
    ]
    for name, paths in zip(classes, files, strict=True):
        if not paths:
            raise InputValueError(f"class folder {split_dir / name} has no .txt files")
    return files


def _read_split(
    split_dir: Path, classes: list[str], max_length: int | None, tokenizer: DNATokenizer
) -> tuple[list[np.ndarray], list[int], list[str]]:
    seqs, labels, files = [], [], []
    for label, paths in enumerate(class_files(split_dir, classes)):
        for path in paths:
            try:
                # a leading UTF-8 byte-order mark (some Windows editors write one) is no base
                text = path.read_bytes().removeprefix(codecs.BOM_UTF8).decode("ascii").strip()
            except UnicodeDecodeError as err:
                raise InputValueError(
                    f"{path}: byte {err.start} is not an ASCII letter; a benchmark file holds "
                    "one DNA sequence as plain text"
                ) from None
            if not text:
                raise InputValueError(f"{path} holds no sequence (empty file)")
            try:
                ids = tokenizer.encode_array(text)
            except InputValueError as err:
                raise InputValueError(f"{path}: {err}") from None
            seqs.append(ids if max_length is None else ids[:max_length])
            labels.append(label)
            files.append(str(path))
    return seqs, labels, files


def left_pad(seqs: list[np.ndarray], length: int, pad_id: int, vocab_size: int) -> torch.Tensor:
    """Stack 1-D id arrays (each at most ``length`` long) right-aligned: (N, length), in the
    smallest dtype that holds ``vocab_size`` ids."""
    out = np.full((len(seqs), length), pad_id, dtype=id_dtype(vocab_size))
    for row, ids in enumerate(seqs):
        if len(ids):
            out[row, length - len(ids) :] = ids
    return torch.from_numpy(out)


def task_tokenizer() -> DNATokenizer:
    """The tokenizer every task is encoded with (a model that reads them must share its ids)."""
    return DNATokenizer()


def load_task(
    root: str | Path,
    task: str,
    max_length: int | None = None,
    download: bool = True,
    section: str = "benchmark",
) -> TaskData:
    """Read, tokenize and left-pad both splits of ``task``. ``max_length`` None: the task's
    length in TASK_MAX_LENGTH, else the longest sequence in the task (``section``:
    ``task_dir``'s)."""
    folder, train_classes = task_layout(root, task, download, section)
    tokenizer = task_tokenizer()
    length = max_length or TASK_MAX_LENGTH.get(task)
    read = {s: _read_split(folder / s, train_classes, length, tokenizer) for s in SPLITS}
    if length is None:
        length = max(len(ids) for seqs, _, _ in read.values() for ids in seqs)
    splits = {
        s: Split(
            ids=left_pad(seqs, length, tokenizer.pad_id, tokenizer.vocab_size),
            labels=torch.tensor(labels, dtype=torch.long),
            files=files,
        )
        for s, (seqs, labels, files) in read.items()
    }
    return TaskData(task, train_classes, length, splits["train"], splits["test"], tokenizer)
