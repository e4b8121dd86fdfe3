"""An audit of what genodiff reads from a user's disk: damaged, hostile or enormous files are
one input error saying what is wrong, in bounded time and memory, and change nothing."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from genodiff import cli
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
