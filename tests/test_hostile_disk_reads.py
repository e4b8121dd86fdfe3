"""An audit of what genodiff reads from a user's disk: damaged, hostile or enormous files are
one input error saying what is wrong, in bounded time and memory, and change nothing."""

from __future__ import annotations

import gzip
import os
import tracemalloc
from pathlib import Path

import pytest

from genodiff import cli, sample_files
from genodiff.errors import InputValueError
from genodiff.sample_files import read_sample_labels, read_samples
from tests.test_bad_input_cli import one_line_error

# ----------------------------------------------------------------------------- sample files


def corrupt_gzip(path: Path) -> Path:
    """A gzip file whose deflate stream is damaged right after its header: zlib refuses the
    block (``zlib.error``), before any CRC is checked."""
    data = bytearray(gzip.compress((">s\n" + "ACGT" * 5000 + "\n").encode()))
    data[10] = 0xFF  # the first deflate block's header: an invalid block type
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("read", [read_samples, read_sample_labels])
def test_a_sample_file_with_a_corrupt_gzip_stream_is_an_input_error(tmp_path, read):
    path = corrupt_gzip(tmp_path / "samples.fa.gz")
    with pytest.raises(InputValueError, match="is not a readable gzip file") as caught:
        read(path)  # was zlib.error: a traceback
    assert str(path) in str(caught.value)


def test_evaluate_samples_of_a_corrupt_gzip_file_is_one_line(tmp_path, capsys):
    path = corrupt_gzip(tmp_path / "samples.fa.gz")
    reference = tmp_path / "reference.fa"
    reference.write_text(">r\n" + "ACGT" * 50 + "\n")
    assert cli.main(["evaluate-samples", str(path), "--reference", str(reference)]) == 2
    assert "is not a readable gzip file" in one_line_error(capsys, "evaluate-samples")


def test_sample_labels_of_a_file_that_is_no_text_are_an_input_error(tmp_path):
    path = tmp_path / "samples.fa"
    path.write_bytes(b">s label=a\n\xff\xfeACGT\n")
    with pytest.raises(InputValueError, match="is not UTF-8 text"):
        read_sample_labels(path)  # was UnicodeDecodeError


def test_sample_labels_of_a_jsonl_line_that_is_no_object_are_an_input_error(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text('{"text": "ACGT", "label": "a"}\n["ACGT"]\n')
    with pytest.raises(InputValueError, match=r"line 2: expected a JSON object"):
        read_sample_labels(path)  # was AttributeError: 'list' object has no attribute 'get'


def test_a_jsonl_line_nested_past_the_parser_is_an_input_error(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InputValueError, match="nested deeper than any sample file"):
        read_samples(path)  # was RecursionError


MiB = 1 << 20


@pytest.fixture
def machine_of_8_mib(monkeypatch) -> int:
    """A host of 8 MiB of memory: a sample file may hold 1 MiB of text (an eighth)."""

    def memory(device) -> tuple[int, int]:
        return 8 * MiB, 8 * MiB

    # raising=False: the tests fail on a reader that reads without bound, not on this line
    monkeypatch.setattr(sample_files, "memory_available", memory, raising=False)
    return MiB


def gzip_bomb(path: Path, text: bytes) -> Path:
    path.write_bytes(gzip.compress(text, compresslevel=9))
    return path


# One line that never ends: the worst case, read whole by a line reader.
BOMBS = {
    "samples.fa.gz": b">s\n" + b"A" * (32 * MiB),
    "samples.txt.gz": b"A" * (32 * MiB),
    "samples.jsonl.gz": b'{"text": "' + b"A" * (32 * MiB),
}


@pytest.mark.parametrize("read", [read_samples, read_sample_labels])
@pytest.mark.parametrize("name", BOMBS)
def test_a_gzip_bomb_of_samples_is_refused_in_bounded_memory(
    tmp_path, machine_of_8_mib, name, read
):
    path = gzip_bomb(tmp_path / name, BOMBS[name])
    assert path.stat().st_size < MiB // 8  # 32 MiB of text in a small file
    tracemalloc.start()
    try:
        with pytest.raises(InputValueError) as caught:
            read(path)  # was: the whole 32 MiB line read into memory (a bomb: an OOM kill)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert str(path) in message
    assert "holds more than 1.0 MiB of text (reading stopped after 1.0 MiB)" in message
    assert "Split the file" in message and "evaluate fewer samples" in message
    assert peak < 8 * MiB, peak  # a few copies of the 1 MiB read, not 32 MiB


def test_a_gzip_bomb_of_many_short_samples_is_refused(tmp_path, machine_of_8_mib):
    path = gzip_bomb(tmp_path / "samples.fa.gz", b">s\nACGT\n" * (4 * MiB))
    with pytest.raises(InputValueError, match="holds more than 1.0 MiB of text"):
        read_samples(path)


def test_a_sample_file_of_as_much_text_as_the_machine_takes_reads(tmp_path, machine_of_8_mib):
    sample = "ACGT" * 250  # 1 kb samples: 1,010 bytes a record with its header and newlines
    count = machine_of_8_mib // (len(sample) + 10)
    text = "".join(f">s_{i:05d}\n{sample}\n" for i in range(count))
    text += ">last\n" + "C" * (machine_of_8_mib - len(text) - len(">last\n") - 1) + "\n"
    assert len(text) == machine_of_8_mib  # the limit exactly
    path = gzip_bomb(tmp_path / "samples.fa.gz", text.encode())
    samples = read_samples(path)
    assert samples[:count] == [sample] * count
    assert len(samples) == count + 1 and set(samples[-1]) == {"C"}
    assert read_sample_labels(path) == [None] * (count + 1)
    plain = tmp_path / "samples.fa"
    plain.write_text(text + "A")  # one byte past it
    with pytest.raises(InputValueError, match="reading stopped after 1.0 MiB"):
        read_samples(plain)


def test_a_sample_file_may_take_an_eighth_of_the_hosts_memory(monkeypatch):
    from genodiff import memory

    monkeypatch.setattr(memory, "host_memory", lambda: 24 << 30)  # a machine (or job) of 24 GiB
    assert sample_files.sample_text_limit() == 3 << 30


def test_evaluate_samples_of_a_gzip_bomb_is_one_line(tmp_path, capsys, machine_of_8_mib):
    path = gzip_bomb(tmp_path / "samples.fa.gz", BOMBS["samples.fa.gz"])
    reference = tmp_path / "reference.fa"
    reference.write_text(">r\n" + "ACGT" * 50 + "\n")
    assert cli.main(["evaluate-samples", str(path), "--reference", str(reference)]) == 2
    err = one_line_error(capsys, "evaluate-samples")
    assert f"{path} holds more than 1.0 MiB of text" in err and "Split the file" in err


# ----------------------------------------------------------------------------- config YAML


def laughs(levels: int) -> str:
    """YAML whose last anchor expands to 10**levels values through aliases of aliases: a few
    hundred bytes that a YAML reader builds as a tree of 10**levels leaves."""
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def experiment(folder: Path, name: str, body: str) -> Path:
    """An experiment file in ``folder`` that picks the shipped demo, with ``body`` after it."""
    path = folder / f"{name}.yaml"
    path.write_text(f"defaults:\n  - demo\n  - _self_\n{body}")
    return path


def test_a_config_of_nested_aliases_is_refused_before_it_is_built(tmp_path, capsys):
    config = experiment(tmp_path, "laughs", laughs(9))  # 10**9 values: hours to build
    assert cli.main(["train", str(config), f"output_dir={tmp_path / 'out'}"]) == 2
    err = one_line_error(capsys, "train")
    assert f"{config} expands to more than 10,000 values" in err
    assert not (tmp_path / "out").exists()


def test_a_config_nested_past_the_readers_recursion_is_refused(tmp_path, capsys):
    config = experiment(tmp_path, "deep", "x: " + "[" * 5000 + "]" * 5000 + "\n")
    assert cli.main(["train", str(config), f"output_dir={tmp_path / 'out'}"]) == 2
    err = one_line_error(capsys, "train")  # was RecursionError, a traceback
    assert f"{config}: collections are nested more than 32 deep (line 4)" in err


@pytest.mark.parametrize("body", ["x: &a [1, *a]\n", "x: &a {b: {c: *a}}\n", "x: &a {<<: *a}\n"])
def test_a_config_value_that_holds_itself_is_refused(tmp_path, capsys, body):
    config = experiment(tmp_path, "itself", body)
    assert cli.main(["train", str(config), f"output_dir={tmp_path / 'out'}"]) == 2
    err = one_line_error(capsys, "train")  # was RecursionError, a traceback of 175 KB
    assert f"{config}: the alias *a (line 4) is inside the collection &a it names" in err
    assert not (tmp_path / "out").exists()


def test_an_alias_of_a_closed_anchor_is_no_value_that_holds_itself(tmp_path):
    from genodiff.plain_records import check_yaml_file

    path = tmp_path / "twice.yaml"
    path.write_text("pair: &a [1, [2, 3]]\nnested: {b: *a, c: [*a]}\n")
    check_yaml_file(path)  # no error: the anchor's collection closed before each alias


def test_a_hostile_yaml_file_beside_an_experiment_is_left_out_with_a_warning(tmp_path):
    from genodiff.config import load_config

    config = experiment(tmp_path, "mine", "seed: 7\n")
    (tmp_path / "laughs.yaml").write_text(laughs(9))  # not the experiment's: not needed
    with pytest.warns(UserWarning, match=r"laughs.yaml expands to more than 10,000 values"):
        cfg = load_config(config)
    assert cfg.seed == 7


def test_anchors_and_aliases_of_a_real_config_still_read(tmp_path):
    from genodiff.config import load_config

    body = "seed: &same 11\nsamples:\n  num_samples: *same\n"
    assert load_config(experiment(tmp_path, "anchored", body)).samples.num_samples == 11


# ----------------------------------------------------------------------------- infill templates


def gzipped_fasta(path: Path, records: list[tuple[str, int]]) -> Path:
    """A gzip FASTA of ``records`` (name, bases): each record one line of that many A's, a
    few kilobytes compressed for tens of megabytes read."""
    with gzip.open(path, "wb", compresslevel=1) as handle:
        for name, bases in records:
            handle.write(f">{name}\n".encode())
            for _ in range(bases >> 20):
                handle.write(b"A" * (1 << 20))
            handle.write(b"A" * (bases % (1 << 20)) + b"\n")
    return path


def test_an_infill_template_of_one_enormous_record_is_refused_unread(tmp_path):
    from genodiff.domains.fasta import fasta_template

    path = gzipped_fasta(tmp_path / "bomb.fa.gz", [("chr", 40 << 20)])
    with pytest.raises(InputValueError, match="the template is longer than 16,777,216") as caught:
        fasta_template(path)  # was the whole 40 MB read (a gzip bomb: all of its gigabytes)
    assert caught.value.parameter == "infill"


def test_an_infill_template_is_the_first_record_read_alone(tmp_path):
    import tracemalloc

    from genodiff.domains.fasta import fasta_template

    path = gzipped_fasta(tmp_path / "genome.fa.gz", [("first", 12), ("second", 40 << 20)])
    tracemalloc.start()
    try:
        assert fasta_template(path) == "A" * 12
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # was the whole file read: 40 MB and more


def test_an_infill_fasta_whose_first_record_is_empty_is_an_input_error(tmp_path):
    from genodiff.domains.fasta import fasta_template

    path = tmp_path / "template.fa"
    path.write_text("\n>empty\n>second\nACGT\n")
    with pytest.raises(InputValueError, match=r"first record of .* \(empty\) has no sequence"):
        fasta_template(path)  # was Biopython's ValueError about comments, a traceback


def test_a_text_template_of_one_enormous_line_is_refused_unread(tmp_path):
    from genodiff.sample_formats import line_template

    path = tmp_path / "template.txt"
    path.write_bytes(b"x" * (20 << 20))
    with pytest.raises(InputValueError, match="the template is longer than 16,777,216"):
        line_template(path)  # was the whole line read


# ----------------------------------------------------------------------------- genomes


def test_a_genome_that_is_a_fifo_or_a_folder_is_said_as_such(tmp_path):

    from genodiff.data.genome import Genome

    fifo = tmp_path / "pipe.fa"
    os.mkfifo(fifo)
    with pytest.raises(InputValueError, match=f"FASTA file {fifo} is not a regular file"):
        Genome(fifo)  # was "FASTA file not found"
    with pytest.raises(InputValueError, match=f"FASTA file {tmp_path} is a folder"):
        Genome(tmp_path)


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_fifo_named_as_the_index_is_left_alone(tmp_path, kind):

    from genodiff.data.genome import Genome

    fasta = tmp_path / "genome.fa"
    fasta.write_text(">r\n" + "ACGT" * 30 + "\n")
    index = tmp_path / "genome.fa.fai"
    index.mkdir() if kind == "folder" else os.mkfifo(index)
    genome = Genome(fasta, cache_dir=tmp_path / "cache")  # was IsADirectoryError; a FIFO removed
    assert genome.fetch("r", 0, 8) == "ACGTACGT"
    assert index.is_dir() if kind == "folder" else index.is_fifo()
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".fai"]


def test_a_fasta_line_longer_than_indexing_holds_is_refused_before_it_is_read(
    tmp_path, monkeypatch
):
    from genodiff.data import genome

    monkeypatch.setattr(genome, "MAX_LINE_BYTES", 4096)  # stands for 1 GiB: a 10 GB line
    fasta = tmp_path / "one_line.fa"
    fasta.write_text(">chr\n" + "ACGT" * 2000 + "\n>short\nACGT\n")
    with pytest.raises(InputValueError, match="has a line longer than 4,096 bytes"):
        genome.Genome(fasta, cache_dir=tmp_path / "cache")  # was held whole by pyfaidx
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one_line.fa"]  # no index written


def test_a_long_line_is_refused_before_pyfaidx_rebuilds_an_index_older_than_the_fasta(
    tmp_path, monkeypatch
):

    from genodiff.data import genome

    fasta = tmp_path / "one_line.fa"
    fasta.write_text(">chr\n" + "ACGT" * 2000 + "\n")
    genome.Genome(fasta).close()  # its index written, under the real limit
    index = tmp_path / "one_line.fa.fai"
    written = index.read_bytes()
    monkeypatch.setattr(genome, "MAX_LINE_BYTES", 4096)  # stands for 1 GiB: a 10 GB line
    later = index.stat().st_mtime + 100
    os.utime(fasta, (later, later))  # touched, copied without -p: pyfaidx would rebuild
    with pytest.raises(InputValueError, match="has a line longer than 4,096 bytes"):
        genome.Genome(fasta)  # was: rebuilt by pyfaidx, the line held whole
    assert index.read_bytes() == written


def test_a_current_index_of_a_one_line_chromosome_is_checked_without_reading_the_line(tmp_path):
    import tracemalloc

    from genodiff.data.genome import Genome

    fasta = tmp_path / "one_line.fa"
    with fasta.open("w") as handle:
        handle.write(">chr\n" + "ACGT" * (8 << 20) + "\n")  # a 32 MB line
    Genome(fasta).close()  # its index written
    tracemalloc.start()
    try:
        genome = Genome(fasta)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert genome.length("chr") == 32 << 20 and genome.fetch("chr", 8, 12) == "ACGT"
    assert peak < 4 << 20  # was the 32 MB line read to check the index


# ----------------------------------------------------------------------------- checkpoints


def rezipped(source: Path, dest: Path, extra: bytes | None = None) -> Path:
    """The torch file ``source`` with its members deflated (torch reads them so too), and an
    ``extra`` member when given."""
    import zipfile

    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info), compress_type=zipfile.ZIP_DEFLATED)
        if extra is not None:
            zout.writestr("m/extra", extra, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return dest


def forged_size(path: Path, member: str, size: int) -> Path:
    """``path`` with the uncompressed size of ``member`` in its local and central headers set to
    ``size`` (what a zip bomb's headers say; its stream is left as it is)."""
    import struct

    data, name = bytearray(path.read_bytes()), member.encode()
    for signature, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = data.index(signature)
        while True:  # to the header of ``member``
            name_at = start + (30 if at == 22 else 46)
            if data[name_at : name_at + len(name)] == name:
                break
            start = data.index(signature, start + 4)
        data[start + at : start + at + 4] = struct.pack("<I", size)
    path.write_bytes(bytes(data))
    return path


def test_a_checkpoint_holding_a_zip_bomb_is_refused_before_it_is_decompressed(
    tmp_path, monkeypatch
):
    import torch

    from genodiff.checkpoints import io, read_checkpoint_file

    torch.save({"state_dict": {"w": torch.arange(4.0)}, "global_step": 1}, tmp_path / "m.ckpt")
    forged = rezipped(tmp_path / "m.ckpt", tmp_path / "forged.ckpt", bytes(4096))
    forged_size(forged, "m/extra", 4_000_000_000)  # a header no deflate stream of it matches
    with pytest.raises(InputValueError, match=r"m/extra says it expands from \d+ to 4,000,000,000"):
        read_checkpoint_file(forged)  # was its bytes read until the stream's end said otherwise
    deflated = rezipped(tmp_path / "m.ckpt", tmp_path / "deflated.ckpt")
    assert read_checkpoint_file(deflated)["state_dict"]["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    bomb = rezipped(tmp_path / "m.ckpt", tmp_path / "bomb.ckpt", bytes(8 << 20))
    monkeypatch.setattr(io, "memory_available", lambda device: (4 << 20, 4 << 20))  # 4 MiB
    with pytest.raises(InputValueError, match=r"expand to 8\.0 MiB, more than this machine's 4"):
        read_checkpoint_file(bomb)  # stands for a terabyte on a machine of 24 GiB


def test_a_deflated_checkpoint_of_an_all_zero_tensor_still_loads(tmp_path):
    """Zeros deflate about 1,030 times: a legitimate re-zipped checkpoint (an optimizer's fresh
    moments, a zero-initialised embedding) is no bomb (was refused past 100 times)."""
    import torch

    from genodiff.checkpoints import read_checkpoint_file

    torch.save({"state_dict": {"w": torch.zeros(16 << 20)}, "global_step": 1}, tmp_path / "z.ckpt")
    deflated = rezipped(tmp_path / "z.ckpt", tmp_path / "deflated.ckpt")
    assert deflated.stat().st_size < 1 << 20  # 64 MiB of zeros in some 65 KB
    weights = read_checkpoint_file(deflated)["state_dict"]["w"]
    assert weights.shape == (16 << 20,) and not weights.any()


def test_a_deflated_checkpoint_resumes_as_a_stored_one(tmp_path):
    """A deflated member cannot be memory-mapped: the mapped read (a resume's look at a fold's
    checkpoint) reads it instead. Was: "not a loadable genodiff checkpoint", and fine-tuning
    took the fold for one without a checkpoint and deleted its folder."""
    import torch

    from genodiff.checkpoints import read_checkpoint_file
    from genodiff.checkpoints.io import loadable_checkpoint

    torch.save({"state_dict": {"w": torch.arange(4.0)}, "global_step": 7}, tmp_path / "m.ckpt")
    deflated = rezipped(tmp_path / "m.ckpt", tmp_path / "deflated.ckpt")
    mapped = read_checkpoint_file(deflated, mmap=True)
    assert mapped["state_dict"]["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert loadable_checkpoint(deflated)["global_step"] == 7


def test_a_runtime_error_that_is_no_damaged_block_is_not_called_one(tmp_path, monkeypatch):
    """pyfaidx's own RuntimeError while it indexes a plain FASTA is a malformed FASTA, not a
    corrupt gzip (was: "truncated or corrupt BGZF/gzip file" for a file that is no gzip)."""
    import pyfaidx

    from genodiff.data.genome import Genome

    fasta = tmp_path / "plain.fa"
    fasta.write_text(">a\nACGT\n")

    def unhandled(*args, **kwargs):  # what pyfaidx raises for line layouts it does not handle
        raise RuntimeError(
            "Unhandled exception during fasta indexing at entry aPlease report this issue at "
            "https://github.com/mdshw5/pyfaidx/issues [(3, 2)]"
        )

    monkeypatch.setattr(pyfaidx, "Fasta", unhandled)
    with pytest.raises(InputValueError) as caught:
        Genome(fasta).fetch("a", 0, 4)
    said = f"malformed FASTA {fasta}: Unhandled exception during fasta indexing at entry a"
    assert str(caught.value) == said  # not pyfaidx's request to report it to them

    def bug(*args, **kwargs):  # any other RuntimeError is a bug: its traceback kept
        raise RuntimeError("something else")

    monkeypatch.setattr(pyfaidx, "Fasta", bug)
    with pytest.raises(RuntimeError, match="something else") as caught:
        Genome(fasta)
    assert not isinstance(caught.value, InputValueError)


def test_a_bgzf_block_damaged_after_indexing_is_an_input_error(tmp_path):
    import random

    from genodiff.data.genome import Genome, bgzip_fasta

    bases = random.Random(0).choices("ACGT", k=120_000)  # blocks of some 30 kB compressed
    lines = "".join("".join(bases[i : i + 60]) + "\n" for i in range(0, 120_000, 60))
    plain = tmp_path / "plain.fa"
    plain.write_text(f">a\n{lines}>b\n{lines}")
    fasta = bgzip_fasta(plain, tmp_path / "genome.fa.gz")
    Genome(fasta).close()  # indexed while whole
    data = bytearray(fasta.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a block's deflate stream
    fasta.write_bytes(bytes(data))
    with pytest.raises(InputValueError, match="truncated or corrupt BGZF/gzip file"):
        Genome(fasta)  # was RuntimeError: Decompressed to N, not 65280 (the index's check)


def refusal_in_a_process(imports: str, call: str, *args: Path) -> str:
    """The ValueError that ``call`` (of ``args``, as sys.argv[1:]) raises, run in a Python of
    its own with a time limit: a FIFO it opened would wait for a writer forever."""
    import subprocess
    import sys

    code = f"import sys\n{imports}\ntry:\n    {call}\nexcept ValueError as err:\n    print(err)\n"
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=60
    )  # was a wait without end (TimeoutExpired here)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_safe_checkpoint_reader_never_opens_a_fifo(tmp_path):

    fifo = tmp_path / "last.ckpt"
    os.mkfifo(fifo)
    imports = "from genodiff.checkpoints import read_checkpoint_file"
    said = refusal_in_a_process(imports, "read_checkpoint_file(sys.argv[1])", fifo)
    assert f"checkpoint {fifo} is not a regular file" in said


def test_bgzip_fasta_refuses_a_fifo_before_opening_it(tmp_path):

    fifo, out = tmp_path / "in.fa", tmp_path / "out.fa.gz"
    os.mkfifo(fifo)
    imports = "from genodiff.data import bgzip_fasta"
    said = refusal_in_a_process(imports, "bgzip_fasta(sys.argv[1], sys.argv[2])", fifo, out)
    assert f"FASTA file {fifo} is not a regular file" in said
    assert not out.exists()


def test_a_split_bed_that_is_a_fifo_is_said_as_such(tmp_path):

    fifo = tmp_path / "splits.bed"
    os.mkfifo(fifo)
    imports = "from genodiff.data.hg38 import read_bed"
    said = refusal_in_a_process(imports, "read_bed(sys.argv[1])", fifo)
    assert f"BED file {fifo} is not a regular file" in said  # was "BED file not found"


def test_a_bed_that_is_a_loop_of_links_is_said_as_such_and_a_missing_one_keeps_its_words(
    tmp_path,
):
    from genodiff.data.hg38 import read_bed

    loop = tmp_path / "splits.bed"
    loop.symlink_to(loop)
    with pytest.raises(InputValueError, match=f"BED file {loop} is a loop of symbolic links"):
        read_bed(loop)  # was "BED file not found" (the caller's exists() check came first)
    with pytest.raises(FileNotFoundError, match="^BED file not found: .*gone.bed$"):
        read_bed(tmp_path / "gone.bed")
