"""Genomic Benchmarks folders: reading, padding, errors, package download, folds."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from genodiff.data.benchmarks import load_task
from genodiff.data.download import DownloadError
from genodiff.finetuning.protocol import fold_splits
from genodiff.tokenizers import DNATokenizer

DEMO_ROOT = Path(__file__).parent / "data" / "genomic_benchmarks"


def write_task(root: Path, task: str, layout: dict[str, dict[str, list[str]]]) -> Path:
    """layout: split -> class -> sequences; file i of a class is ``{i:03d}.txt``."""
    for split, classes in layout.items():
        for name, seqs in classes.items():
            folder = root / task / split / name
            folder.mkdir(parents=True)
            for i, seq in enumerate(seqs):
                (folder / f"{i:03d}.txt").write_text(seq + "\n")
    return root / task


def test_classes_sorted_left_padded_and_truncated(tmp_path):
    layout = {
        "train": {"zebra": ["ACGT", "GG"], "apple": ["TTTTTT"]},
        "test": {"zebra": ["C"], "apple": ["acgtac"]},
    }
    write_task(tmp_path, "toy", layout)
    task = load_task(tmp_path, "toy", download=False)
    assert task.classes == ["apple", "zebra"]  # sorted folder names
    assert task.max_length == 6  # the longest sequence, no table entry for "toy"
    tok = DNATokenizer()
    expected_rows = []
    for name in task.classes:
        for seq in layout["train"][name]:
            expected_rows.append([tok.pad_id] * (6 - len(seq)) + tok.encode(seq))
    assert task.train.ids.tolist() == expected_rows
    assert task.train.labels.tolist() == [0, 1, 1]
    assert task.test.ids[1].tolist() == [4] * 5 + [8]

    short = load_task(tmp_path, "toy", max_length=3, download=False)
    assert short.train.ids[0].tolist() == tok.encode("TTT")  # first 3 bases kept
    assert short.train.ids[2].tolist() == [4] + tok.encode("GG")


def test_missing_task_says_where_and_how(tmp_path):
    with pytest.raises(FileNotFoundError, match="task 'nope' not found.*pip install genomic"):
        load_task(tmp_path, "nope", download=True)
    # the keys of the config section the root came from (fine-tuning's by default)
    with pytest.raises(
        FileNotFoundError, match=r"point benchmark\.root at it.*benchmark\.download"
    ):
        load_task(tmp_path, "nope", download=False)
    with pytest.raises(FileNotFoundError, match=r"point data\.root at it.*set data\.download"):
        load_task(tmp_path, "nope", download=False, section="data")


def test_a_mistyped_task_name_is_said_with_the_name_meant(tmp_path):
    write_task(tmp_path, "my_enhancers", {"train": {"a": ["ACGT"]}, "test": {"a": ["ACGT"]}})
    # was: "not found: no folder ...", the folder there (or the benchmark) meant left to guess
    with pytest.raises(
        FileNotFoundError, match=r"my_enhancer \(did you mean 'my_enhancers'\?\)\. "
    ):
        load_task(tmp_path, "my_enhancer", download=False)
    with pytest.raises(FileNotFoundError, match=r"\(did you mean 'human_nontata_promoters'\?\)"):
        load_task(tmp_path, "human_nontata_promoter", download=False)
    with pytest.raises(FileNotFoundError) as caught:
        load_task(tmp_path, "zzz", download=False)
    assert "did you mean" not in str(caught.value)  # nothing spelled like it


def test_empty_class_folder(tmp_path):
    write_task(tmp_path, "t", {"train": {"a": ["ACGT"]}, "test": {"a": ["ACGT"]}})
    (tmp_path / "t" / "train" / "b").mkdir()
    (tmp_path / "t" / "test" / "b").mkdir()
    with pytest.raises(ValueError, match=r"class folder .*train/b has no \.txt files"):
        load_task(tmp_path, "t", download=False)


def test_bad_character_names_file_and_position(tmp_path):
    splits = {"train": {"a": ["ACGT", "ACXGT"], "b": ["GG"]}, "test": {"a": ["AC"], "b": ["GG"]}}
    write_task(tmp_path, "t", splits)
    with pytest.raises(ValueError, match=r"train/a/001\.txt: .*'X' at position 2"):
        load_task(tmp_path, "t", download=False)


def test_a_txt_entry_that_is_no_file_is_named(tmp_path):
    write_task(
        tmp_path, "t", {"train": {"a": ["AC"], "b": ["GT"]}, "test": {"a": ["A"], "b": ["C"]}}
    )
    (tmp_path / "t" / "train" / "a" / "more.txt").mkdir()
    with pytest.raises(ValueError, match=r"sequence file .*train/a/more\.txt is a folder"):
        load_task(tmp_path, "t", download=False)  # was IsADirectoryError, [Errno 21]
    (tmp_path / "t" / "train" / "a" / "more.txt").rmdir()
    (tmp_path / "t" / "test" / "b" / "moved.txt").symlink_to(tmp_path / "gone.txt")
    with pytest.raises(FileNotFoundError, match=r"sequence file .*test/b/moved\.txt not found"):
        load_task(tmp_path, "t", download=False)


def test_a_byte_order_mark_and_windows_line_ends_are_no_bases(tmp_path):
    splits = {"train": {"a": ["ACGT"], "b": ["GGA"]}, "test": {"a": ["AC"], "b": ["GG"]}}
    write_task(tmp_path, "t", splits)
    (tmp_path / "t" / "train" / "a" / "000.txt").write_bytes(b"\xef\xbb\xbfACGT\r\n")
    task = load_task(tmp_path, "t", download=False)
    tok = DNATokenizer()
    assert task.train.ids.tolist() == [tok.encode("ACGT"), [tok.pad_id] + tok.encode("GGA")]


def test_classes_differ_between_splits(tmp_path):
    write_task(tmp_path, "t", {"train": {"a": ["AC"], "b": ["GT"]}, "test": {"a": ["AC"]}})
    with pytest.raises(ValueError, match="train classes a, b differ from test classes a;"):
        load_task(tmp_path, "t", download=False)


def test_missing_task_is_fetched_with_genomic_benchmarks(tmp_path, monkeypatch):
    calls = []

    def download_dataset(name, version=None, dest_path=None):
        calls.append((name, version, dest_path))
        layout = {"train": {"pos": ["ACGT"], "neg": ["TTTT"]}, "test": {"pos": ["A"], "neg": ["C"]}}
        return write_task(Path(dest_path), name, layout)

    fake_genomic_benchmarks(monkeypatch, download_dataset)
    task = load_task(tmp_path / "gb", "demo_human_or_worm")
    assert [(name, version) for name, version, _ in calls] == [("demo_human_or_worm", 0)]
    assert Path(calls[0][2]).parent == tmp_path / "gb"  # fetched beside the task, renamed
    assert task.classes == ["neg", "pos"]
    assert task.max_length == 200  # the table's length for this benchmark
    load_task(tmp_path / "gb", "demo_human_or_worm")
    assert len(calls) == 1  # present now: not fetched again
    with pytest.raises(FileNotFoundError, match="not found"):
        load_task(tmp_path / "gb", "other", download=False)


def fake_genomic_benchmarks(monkeypatch, download_dataset) -> None:
    """``genomic_benchmarks.loc2seq`` in ``sys.modules``, its ``download_dataset`` the one given."""
    package = types.ModuleType("genomic_benchmarks")
    loc2seq = types.ModuleType("genomic_benchmarks.loc2seq")
    loc2seq.download_dataset = download_dataset
    package.loc2seq = loc2seq
    monkeypatch.setitem(sys.modules, "genomic_benchmarks", package)
    monkeypatch.setitem(sys.modules, "genomic_benchmarks.loc2seq", loc2seq)


def test_a_task_download_that_fails_midway_leaves_no_partial_task(tmp_path, monkeypatch):
    """genomic-benchmarks writes a task file by file: a download cut off after some of them
    must not leave a folder that the next run takes for the whole task."""
    layout = {
        "train": {"pos": ["ACGT"], "neg": ["TTTT"]},
        "test": {"pos": ["A"], "neg": ["C", "G"]},
    }
    calls = []

    def download_dataset(name, version=None, dest_path=None):
        calls.append(name)
        if len(calls) == 1:  # the network fails before the last test file is written
            cut = {**layout, "test": {"pos": ["A"], "neg": ["C"]}}
            write_task(Path(dest_path), name, cut)
            raise ConnectionResetError(104, "Connection reset by peer")
        return write_task(Path(dest_path), name, layout)

    fake_genomic_benchmarks(monkeypatch, download_dataset)
    root = tmp_path / "gb"
    with pytest.raises(DownloadError, match=r"task 'demo_human_or_worm' \(\[Errno 104\] Conn"):
        load_task(root, "demo_human_or_worm")
    assert list(root.iterdir()) == []  # was: the partial task, taken as whole by the next run
    task = load_task(root, "demo_human_or_worm")
    assert len(calls) == 2  # fetched again
    assert len(task.test) == 3  # every test sequence
    assert sorted(p.name for p in root.iterdir()) == ["demo_human_or_worm"]


def test_folds_stratified_disjoint_reproducible_and_apart_from_test():
    task = load_task(DEMO_ROOT, "human_vs_phage", download=False)
    labels = task.train.labels.numpy()
    splits = fold_splits(labels, 5, seed=0)
    val_sets = [set(v.tolist()) for _, v in splits]
    for (train, val), val_set in zip(splits, val_sets, strict=True):
        assert set(train.tolist()).isdisjoint(val_set)
        assert len(train) + len(val) == len(labels)
        # stratified: each class's count in the validation fold is within 1 of its share
        for c in np.unique(labels):
            share = (labels == c).sum() / len(splits)
            assert abs((labels[val] == c).sum() - share) <= 1
    assert set().union(*val_sets) == set(range(len(labels)))
    assert sum(len(s) for s in val_sets) == len(labels)  # pairwise disjoint
    # validation sequences come from the train split only, never from the test split
    test_files = set(task.test.files)
    test_seqs = {tuple(row) for row in task.test.ids.tolist()}
    for _, val in splits:
        assert all("/train/" in task.train.files[i] for i in val)
        assert test_files.isdisjoint(task.train.files[i] for i in val)
        assert test_seqs.isdisjoint(tuple(task.train.ids[i].tolist()) for i in val)
    again = fold_splits(labels, 5, seed=0)
    assert all((a[1] == b[1]).all() for a, b in zip(splits, again, strict=True))
    other = fold_splits(labels, 5, seed=1)
    assert any(set(a[1]) != set(b[1]) for a, b in zip(splits, other, strict=True))


def test_too_few_sequences_for_the_folds():
    with pytest.raises(ValueError, match="fewer than folds=5"):
        fold_splits(np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1]), 5, seed=0)


def kmers_either_strand(sequence: str, k: int = 32) -> set[str]:
    """The k-mers of ``sequence`` and of its reverse complement (plain Python)."""
    reverse = sequence.translate(str.maketrans("ACGT", "TGCA"))[::-1]
    return {s[i : i + k] for s in (sequence, reverse) for i in range(len(s) - k + 1)}


def test_the_demo_tasks_phage_test_windows_share_no_32_mer_with_its_train_windows():
    # docs/genomic_benchmarks.md: train windows from the first 80% of each genome, test windows
    # from the last 20% (bench/make_gb_demo.py). Phage lambda has no repeats, so no test window
    # may share a 32-mer with a train window; the human windows may, through the genome's
    # repeats (Alu), though no test window overlaps a train window's bases.
    task = DEMO_ROOT / "human_vs_phage"
    train = set().union(
        *(kmers_either_strand(p.read_text().strip()) for p in (task / "train" / "phage").iterdir())
    )
    for path in (task / "test" / "phage").iterdir():
        assert train.isdisjoint(kmers_either_strand(path.read_text().strip())), path
