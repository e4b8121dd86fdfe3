"""One split of a labelled run's sequences, written out to train and use an oracle on.

``genodiff data labelled-split CONFIG --split test --dest DIR`` takes the sequences of ``split``
of a labelled run config (``genodiff.data.labelled``) and writes them out. Of a labelled-FASTA
config (``data.fasta_by_label``): exactly the windows the data module cuts, forward strand,
upper-cased, each named ``class|chrom:start-end``. Of a Genomic Benchmarks config (``data.root``,
``data.task``): each file of the split as it is on disk (upper-cased; the data module cuts it to
``max_length`` when it reads it, and so does ``genodiff finetune``), named ``class|<split
folder>/<class>/<file>`` (test: the task's ``test/`` folder; train and valid: the parts of
``train/`` the data module carves). It writes

- ``DIR/<task>/{train,test}/<class>/<i>.txt``: a Genomic Benchmarks folder that
  ``genodiff finetune`` reads (``benchmark.root=DIR benchmark.tasks=[<task>]``). The split is
  divided again by position, per class: its sequences in file order (FASTA: records in order,
  positions ascending; a benchmark folder: files in name order), the last
  ``round(test_fraction * n)`` of a class's ``n`` (at least one) are the oracle's test set and
  the others its training set, so the oracle's test windows lie after its training windows in
  the genome;
- ``DIR/reference/<class>.fa``: every sequence of the class in the split (both parts), one
  record each named by its name (Biopython's FASTA, 60 bases a line), the real sequences of
  that class for ``genodiff evaluate-samples --reference <class>=DIR/reference/<class>.fa``;
- ``DIR/manifest.json``: the config, split, fraction, counts per class and the name of every
  ``.txt`` file's sequence.

The whole folder is built beside ``DIR`` under a hidden name (``.DIR.PID.tmp``, each file
written by ``atomic_write``) and swapped in at the end by ``genodiff.atomic_files.replace_folder``
(one rename; a non-empty ``DIR`` is replaced only with ``overwrite``, by one atomic exchange on
Linux, else two renames). A kill while the folder is written leaves ``DIR`` as it was and the
hidden folder beside it, to delete; ``replace_folder`` says what a kill during the swap leaves.
An error leaves ``DIR`` as it was and nothing beside it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from genodiff.atomic_files import atomic_write, replace_folder, temporary_path, write_text
from genodiff.data.labelled import LabelledDataModule, LabelledWindows
from genodiff.errors import InputValueError

ORACLE_TEST_FRACTION = 0.2
REFERENCE_FOLDER = "reference"
MANIFEST = "manifest.json"


@dataclass
class ClassWindows:
    """One class's windows of the split, in file order: ``names`` (``class|chrom:start-end``)
    and ``bases``."""

    names: list[str]
    bases: list[str]


def split_windows_by_class(datamodule: LabelledDataModule, split: str) -> dict[str, ClassWindows]:
    """The sequences of ``split`` of a labelled data module, by class, in file order, with
    their names (see the module doc)."""
    dataset = datamodule.heldout_dataset(split)
    classes = datamodule.class_names()
    by_class = {name: ClassWindows([], []) for name in classes}
    for index in range(len(dataset)):
        name = classes[int(dataset.labels[index])]
        item = dataset.item_name(index)
        if not isinstance(dataset, LabelledWindows):  # already class|chrom:start-end
            item = f"{name}|{item}"  # a benchmark file: <split folder>/<class>/<file>
        by_class[name].names.append(item)
        by_class[name].bases.append(datamodule.window_bases(dataset, index))
    return by_class


def oracle_test_count(windows: int, fraction: float) -> int:
    """How many of a class's ``windows`` go to the oracle's test set: ``round(fraction *
    windows)``, at least one and leaving at least one for training."""
    return min(max(round(fraction * windows), 1), windows - 1)


def check_dest(dest: Path, overwrite: bool) -> None:
    """InputValueError when ``dest`` is a file, or a non-empty folder without ``overwrite``."""
    if dest.exists() and not dest.is_dir():
        raise InputValueError(f"dest {dest} is a file; name a folder", parameter="dest")
    if dest.is_dir() and any(dest.iterdir()) and not overwrite:
        raise InputValueError(
            f"dest {dest} is not empty; name a new folder, or overwrite it (everything in it)",
            parameter=("dest", "overwrite"),
        )


def write_labelled_split(
    datamodule: LabelledDataModule,
    split: str,
    dest: str | os.PathLike,
    task: str,
    test_fraction: float = ORACLE_TEST_FRACTION,
    overwrite: bool = False,
    source: str = "",
) -> dict[str, dict[str, int]]:
    """Write ``split`` of ``datamodule`` into ``dest`` (see the module doc); returns per
    class {"windows", "oracle_train", "oracle_test"}. ``source`` (the config) goes into the
    manifest. Every check comes before the first write."""
    dest = Path(dest)
    if not 0 < test_fraction < 1:
        raise InputValueError(
            f"test_fraction (the oracle's test share) must be in (0, 1), got {test_fraction}",
            parameter="test_fraction",
        )
    if not task or "/" in task or task.startswith("."):
        raise InputValueError(f"task {task!r} must be a plain folder name", parameter="task")
    check_dest(dest, overwrite)
    by_class = split_windows_by_class(datamodule, split)
    short = [name for name, windows in by_class.items() if len(windows.names) < 2]
    if short:
        raise InputValueError(
            f"class(es) {', '.join(short)} have fewer than 2 windows in the {split} split, too "
            "few for the oracle's own train and test sets; use a smaller data.max_length or "
            "another split",
            parameter="split",
        )
    staging = temporary_path(dest)
    shutil.rmtree(staging, ignore_errors=True)  # left by a killed writer whose pid was this one
    try:
        counts = _write_folder(staging, by_class, split, task, test_fraction, source)
        replace_folder(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


def write_fasta(path: Path, windows: ClassWindows) -> None:
    """``windows`` as a FASTA at ``path`` (atomically): one record per window, named by its
    name alone."""
    from Bio.Seq import Seq
    from Bio.SeqIO import write as write_records
    from Bio.SeqRecord import SeqRecord

    records = (
        SeqRecord(Seq(bases), id=name, description="")
        for name, bases in zip(windows.names, windows.bases, strict=True)
    )
    with atomic_write(path) as handle:
        write_records(records, handle, "fasta")


def _write_folder(
    folder: Path,
    by_class: dict[str, ClassWindows],
    split: str,
    task: str,
    test_fraction: float,
    source: str,
) -> dict[str, dict[str, int]]:
    files: dict[str, str] = {}
    counts = {}
    for name, windows in by_class.items():
        n = len(windows.names)
        train = n - oracle_test_count(n, test_fraction)
        for i, (window, bases) in enumerate(zip(windows.names, windows.bases, strict=True)):
            part = "train" if i < train else "test"
            relative = f"{task}/{part}/{name}/{i:05d}.txt"
            write_text(folder / relative, bases + "\n")
            files[relative] = window
        write_fasta(folder / REFERENCE_FOLDER / f"{name}.fa", windows)
        counts[name] = {"windows": n, "oracle_train": train, "oracle_test": n - train}
    manifest = {
        "config": source,
        "split": split,
        "task": task,
        "oracle_test_fraction": test_fraction,
        "division": "per class, windows in file order: the last round(fraction * n) (at "
        "least 1) are the oracle's test set, the others its training set",
        "classes": counts,
        "files": files,
    }
    write_text(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return counts
