"""Property-based fuzzing (hypothesis) of what reads user files: FASTA, BED, Genomic Benchmarks
folders and the DNA tokenizer. Random input may be refused, but only with the clear errors the
CLI prints as one line (ValueError / OSError naming the file); valid input always round-trips."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genodiff.data.benchmarks import load_task
from genodiff.data.genome import Genome, bgzip_fasta
from genodiff.data.hg38 import SPLITS, read_bed
from genodiff.tokenizers import DNATokenizer

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
CLEAR_ERRORS = (ValueError, OSError)
DNA = DNATokenizer()

bases = st.text(alphabet="ACGTNacgtn", min_size=1, max_size=300)
record_names = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=">"),
    min_size=1,
    max_size=12,
)


def folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="genodiff-fuzz-"))


def refused_clearly(error: Exception, path: Path) -> bool:
    """The error is one the CLI prints as a line, and it says which file is at fault."""
    return isinstance(error, CLEAR_ERRORS) and path.name in str(error)


# ------------------------------------------------------------------ tokenizer


@FUZZ
@given(bases)
def test_tokenizer_round_trips_valid_dna(seq):
    ids = DNA.encode(seq)
    assert len(ids) == len(seq)
    assert DNA.decode(ids) == seq.upper()
    assert DNA.reverse_complement(DNA.reverse_complement(seq)) == seq


@FUZZ
@given(st.text(max_size=60))
def test_tokenizer_takes_any_text_or_names_the_character(text):
    try:
        ids = DNA.encode(text)
    except ValueError as err:
        assert "cannot tokenize character" in str(err)
    else:
        assert all(DNA.n_id <= i or i in DNA.base_ids for i in ids)
        assert len(ids) == len(text)


# ------------------------------------------------------------------ FASTA


@FUZZ
@given(
    st.lists(st.tuples(record_names, bases), min_size=1, max_size=4, unique_by=lambda r: r[0]),
    st.integers(min_value=1, max_value=90),
    st.sampled_from(["plain", "bgzf"]),
)
def test_valid_fasta_round_trips(records, width, packing):
    path = folder() / "genome.fa"
    lines = []
    for name, seq in records:
        lines.append(f">{name} some description")
        lines += [seq[i : i + width] for i in range(0, len(seq), width)]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    if packing == "bgzf":
        path = bgzip_fasta(path, path.with_suffix(".fa.gz"))
    genome = Genome(path, cache_dir=path.parent / "cache")
    try:
        assert genome.names == [name for name, _ in records]
        for name, seq in records:
            assert genome.length(name) == len(seq)
            assert genome.fetch(name, 0, len(seq)).upper() == seq.upper()
    finally:
        genome.close()


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_as_fasta_are_read_or_refused_clearly(data):
    path = folder() / "random.fa"
    path.write_bytes(data)
    try:
        genome = Genome(path, cache_dir=path.parent / "cache")
        for name in genome.names:
            genome.fetch(name, 0, genome.length(name))
        genome.close()
    except Exception as err:  # noqa: BLE001 (the property: which errors, never a traceback)
        assert refused_clearly(err, path), repr(err)


# ------------------------------------------------------------------ BED


# BED names: no '#', 'track' or 'browser' at the start (those lines are headers in BED).
chromosomes = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.|-]{0,11}", fullmatch=True).filter(
    lambda name: not name.startswith(("track", "browser"))
)
bed_rows = st.tuples(
    chromosomes, st.integers(0, 10**9), st.integers(1, 10**6), st.sampled_from(SPLITS)
)


@FUZZ
@given(st.lists(bed_rows, min_size=1, max_size=20))
def test_valid_bed_round_trips(rows):
    path = folder() / "splits.bed"
    path.write_text("".join(f"{c}\t{s}\t{s + n}\t{split}\n" for c, s, n, split in rows))
    assert [tuple(r) for r in read_bed(path)] == [(c, s, s + n, sp) for c, s, n, sp in rows]


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bed_files_are_read_or_refused_clearly(data):
    path = folder() / "splits.bed"
    path.write_bytes(data)
    try:
        rows = read_bed(path)
    except Exception as err:  # noqa: BLE001
        assert refused_clearly(err, path), repr(err)
    else:
        assert all(0 <= r.start < r.end and r.split in SPLITS for r in rows)


# ------------------------------------------------------------------ Genomic Benchmarks


def write_task(root: Path, files: dict[tuple[str, str, str], bytes]) -> None:
    for (split, label, name), content in files.items():
        target = root / "task" / split / label / f"{name}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


@FUZZ
@given(st.lists(st.tuples(bases, bases), min_size=1, max_size=5))
def test_valid_benchmark_folders_round_trip(pairs):
    root = folder()
    files = {}
    for i, (a, b) in enumerate(pairs):
        for split in ("train", "test"):
            files[(split, "class_a", f"{i}")] = a.encode()
            files[(split, "class_b", f"{i}")] = b.encode()
    write_task(root, files)
    task = load_task(root, "task", download=False)
    length = task.train.ids.shape[1]
    assert length == max(len(s) for pair in pairs for s in pair)
    row = sorted(range(len(pairs)), key=str)  # files are read in name order
    for k, i in enumerate(row):
        a = DNA.decode(task.train.ids[k].tolist(), skip_special_tokens=True)
        assert a == pairs[i][0].upper()


@FUZZ
@given(
    st.dictionaries(
        st.tuples(
            st.sampled_from(["train", "test"]),
            st.sampled_from(["x", "y"]),
            st.sampled_from(["0", "1", "2"]),
        ),
        st.binary(max_size=80),
        min_size=1,
    )
)
def test_random_benchmark_folders_are_read_or_refused_clearly(files):
    root = folder()
    write_task(root, files)
    try:
        load_task(root, "task", download=False)
    except Exception as err:  # noqa: BLE001
        assert isinstance(err, CLEAR_ERRORS), repr(err)
        assert str(root) in str(err) or "task" in str(err), repr(err)
