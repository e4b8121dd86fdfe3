"""FASTA, the DNA domain's sample format: written and read with Biopython, records named
``sample_<i>_seed<S>`` and described by their provenance (``SamplingRun.describe``), the class a
sample was drawn for the ``label=NAME`` word of its header; an infilling template is the first
record of a FASTA file (plain, gzip or BGZF).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import IO

from genodiff.errors import InputValueError
from genodiff.sample_formats import SampleFormat, header_value, template_lines

LABEL_WORD = "label="  # a header's word naming the class a sample was drawn for


def _write_fasta(handle: IO[str], names: Sequence[str], texts: Sequence[str], run) -> None:
    from Bio.Seq import Seq
    from Bio.SeqIO import write as write_records
    from Bio.SeqRecord import SeqRecord

    records = [
        SeqRecord(Seq(text), id=name, description=run.describe())
        for name, text in zip(names, texts, strict=True)
    ]
    write_records(records, handle, "fasta")


def _read_fasta(handle: IO[str], path: Path) -> list[str]:
    from Bio.SeqIO import parse as parse_records

    first = handle.readline()
    while first and not first.strip():
        first = handle.readline()
    if not first:
        return []
    if not first.startswith(">"):
        raise InputValueError(f"{path} is not FASTA: it must start with a '>name' header line")
    handle.seek(0)
    samples = []
    for record in parse_records(handle, "fasta"):
        if not record.seq:
            raise InputValueError(f"{path}: record {record.id!r} has no sequence")
        samples.append(str(record.seq))
    return samples


def _read_fasta_labels(handle: IO[str], path: Path) -> list[str | None]:
    return [header_label(line) for line in handle if line.startswith(">")]


def header_label(header: str) -> str | None:
    """NAME of the first ``label=NAME`` word after a FASTA record's id; None without one."""
    words = header[1:].split()[1:]
    label = next((w[len(LABEL_WORD) :] for w in words if w.startswith(LABEL_WORD)), None)
    return None if label is None else header_value(label)  # as header_word wrote it


FASTA = SampleFormat(
    "FASTA", (".fa", ".fasta", ".fna", ".fas"), _write_fasta, _read_fasta, _read_fasta_labels
)


def fasta_template(path: Path) -> str:
    """The sequence of the first record of a FASTA file (plain, gzip or BGZF), read up to the
    next record's header (``template_lines``: at most ``MAX_TEMPLATE_CHARS`` characters)."""
    from genodiff.data.genome import fasta_errors, open_fasta

    with fasta_errors(path), open_fasta(path) as handle:
        lines = template_lines(handle, path)
        header = next((line for line in lines if line.strip()), None)
        if header is None:
            raise InputValueError(f"infill FASTA {path} is empty")
        if not header.startswith(">"):
            raise InputValueError(f"{path} is not FASTA: it must start with a '>name' header line")
        parts = []
        for line in lines:
            if line.startswith(">"):
                break
            parts.append("".join(line.split()))
    sequence = "".join(parts)
    if not sequence:
        name = next(iter(header[1:].split()), "")
        raise InputValueError(f"the first record of {path} ({name}) has no sequence")
    return sequence
