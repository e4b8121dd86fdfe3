"""Sample files: every format generated sequences are written in and read back from.

A format (``SampleFormat``) is known by its file suffixes. Two are domain-neutral and every
domain writes them: ``.txt`` (one sample per line) and ``.jsonl`` (one JSON object per sample:
``id``, ``text`` and the provenance fields of ``SamplingRun``). A domain adds its own (DNA:
FASTA, ``genodiff.domains.dna``) and lists the formats it writes in ``Domain.sample_formats``.
``write_samples`` writes a format of the samples' domain, atomically; ``read_samples`` reads
any format of any installed domain, optionally gzipped (``.gz``). Infilling templates are read
here too: the first FASTA record (``fasta_template``) or the first non-empty line
(``line_template``), as the domain says.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from torch import Tensor

from genodiff.atomic_files import atomic_write
from genodiff.errors import InputFileNotFoundError, InputValueError

if TYPE_CHECKING:
    from genodiff.domains import Domain
    from genodiff.generate import SamplingRun
    from genodiff.tokenizers import Tokenizer

# (handle, sample names, sample texts, provenance) -> writes the file's content
Writer = Callable[[IO[str], Sequence[str], Sequence[str], "SamplingRun"], None]
# (handle, path for messages) -> the samples' texts
Reader = Callable[[IO[str], Path], list[str]]


@dataclass(frozen=True)
class SampleFormat:
    """A sample file format: its name, the suffixes that select it (lower case, with the
    dot; the first is the usual one), how it is written and read."""

    name: str
    suffixes: tuple[str, ...]
    write: Writer
    read: Reader

    def describe(self) -> str:
        return f"{self.name} ({', '.join(self.suffixes)})"


# --------------------------------------------------------------------------- the formats


def _write_lines(handle: IO[str], names: Sequence[str], texts: Sequence[str], run) -> None:
    handle.writelines(" ".join(text.split()) + "\n" for text in texts)


def _read_lines(handle: IO[str], path: Path) -> list[str]:
    return [line.strip() for line in handle if line.strip()]


def _write_jsonl(handle: IO[str], names: Sequence[str], texts: Sequence[str], run) -> None:
    provenance = run.provenance()
    handle.writelines(
        json.dumps({"id": name, "text": text, **provenance}) + "\n"
        for name, text in zip(names, texts, strict=True)
    )


def _read_jsonl(handle: IO[str], path: Path) -> list[str]:
    samples = []
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputValueError(f"{path}, line {number}: invalid JSON ({err.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InputValueError(
                f'{path}, line {number}: expected a JSON object with a string "text" field'
            )
        if not item["text"].strip():
            raise InputValueError(f'{path}, line {number}: the "text" field is empty')
        samples.append(item["text"])
    return samples


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


TEXT = SampleFormat("text, one sample per line", (".txt",), _write_lines, _read_lines)
JSONL = SampleFormat('JSON Lines, a "text" field per line', (".jsonl",), _write_jsonl, _read_jsonl)
# Every domain writes these.
NEUTRAL_FORMATS = (TEXT, JSONL)
# The DNA domain's own format; its records are named sample_<i>_seed<S> and described by the
# provenance (``SamplingRun.describe``).
FASTA = SampleFormat("FASTA", (".fa", ".fasta", ".fna", ".fas"), _write_fasta, _read_fasta)


# --------------------------------------------------------------------------- which format


def _installed_formats() -> list[tuple[SampleFormat, str | None]]:
    """Every format an installed domain writes, with the domain that owns it (None: neutral)."""
    from genodiff import registry

    formats: dict[SampleFormat, str | None] = dict.fromkeys(NEUTRAL_FORMATS)
    for name, domain in registry.available("domain").items():
        for fmt in domain.sample_formats:
            formats.setdefault(fmt, name)
    return list(formats.items())


def _suffix(path: Path) -> tuple[str, bool]:
    """(the suffix naming the format, lower case; whether the file is gzipped)."""
    suffixes = [s.lower() for s in path.suffixes]
    gzipped = bool(suffixes) and suffixes[-1] == ".gz"
    if gzipped:
        return (suffixes[-2] if len(suffixes) > 1 else ""), True
    return path.suffix.lower(), False


def _lookup(suffix: str) -> tuple[SampleFormat, str | None] | None:
    return next(((f, owner) for f, owner in _installed_formats() if suffix in f.suffixes), None)


def _listing(formats: Sequence[SampleFormat]) -> str:
    return ", ".join(fmt.describe() for fmt in formats)


def format_owner(path: str | os.PathLike) -> str | None:
    """The domain whose own format ``path`` is in (by suffix, ``.gz`` allowed); None for a
    domain-neutral format. ValueError for an unknown format."""
    return _format_of(Path(path))[1]


def _format_of(path: Path) -> tuple[SampleFormat, str | None, bool]:
    suffix, gzipped = _suffix(path)
    found = _lookup(suffix)
    if found is None:
        known = _listing([f for f, _ in _installed_formats()])
        raise InputValueError(
            f"{path}: unknown sample file format {suffix or '(no suffix)'!r}; use {known}, "
            "each optionally gzipped (.gz)"
        )
    return (*found, gzipped)


# --------------------------------------------------------------------------- writing


def check_output(
    path: str | os.PathLike, domain: Domain, inputs: Sequence[tuple[str, str | os.PathLike]] = ()
) -> Path:
    """``path`` as a place ``write_samples`` may write samples of ``domain`` to; ValueError
    for a format the domain does not write (by suffix), a folder, or a file that is one of
    ``inputs`` ((what, path) pairs: the checkpoint, the infilling template, ...), which the
    samples would overwrite."""
    path = Path(path)
    suffix = path.suffix.lower()
    if not any(suffix in fmt.suffixes for fmt in domain.sample_formats):
        usable = _listing(domain.sample_formats)
        found = _lookup(suffix)
        if found is not None:
            raise InputValueError(
                f"{path}: {found[0].name} holds {found[1]} samples, these are {domain.name} "
                f"samples; use {usable}"
            )
        raise InputValueError(
            f"{path}: unknown output format {suffix or '(no suffix)'!r}; use {usable}"
        )
    if path.is_dir():
        raise InputValueError(
            f"--out {path} is a folder; name a file in it, e.g. --out {path / ('samples' + suffix)}"
        )
    for what, source in inputs:
        if path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise InputValueError(
                f"--out {path} is the {what} this command reads ({source}); writing the samples "
                "there would destroy it: choose another --out"
            )
    return path


def write_samples(
    samples: Tensor,
    path: str | os.PathLike,
    run: SamplingRun,
    tokenizer: Tokenizer,
    inputs: Sequence[tuple[str, str | os.PathLike]] = (),
) -> Path:
    """Write one sample per row of ``samples`` (n, L), decoded by ``tokenizer``, to ``path``
    in the format its suffix names (one its domain writes), atomically; the samples are named
    ``sample_<i>_seed<S>``. ``path`` is checked first (``check_output``, never one of
    ``inputs``)."""
    from genodiff.domains import domain_of

    domain = domain_of(tokenizer)
    path = check_output(path, domain, inputs)
    fmt = next(f for f in domain.sample_formats if path.suffix.lower() in f.suffixes)
    names = [f"sample_{i}_seed{run.seed}" for i in range(len(samples))]
    texts = [tokenizer.decode_sample(row.tolist()) for row in samples]
    with atomic_write(path) as handle:
        fmt.write(handle, names, texts, run)
    return path


# --------------------------------------------------------------------------- reading


def _open_text(path: Path, gzipped: bool) -> IO[str]:
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_samples(path: str | os.PathLike) -> list[str]:
    """The samples in ``path``, in any format of an installed domain (FASTA: every record's
    sequence; ``.txt``: every non-blank line, stripped; ``.jsonl``: every line's ``"text"``),
    gzipped or not. ValueError on an unknown format, an empty file or sample, or a malformed
    line (named by its number)."""
    path = Path(path)
    fmt, _, gzipped = _format_of(path)
    if not path.is_file():
        raise InputFileNotFoundError(f"sample file {path} not found")
    try:
        with _open_text(path, gzipped) as handle:
            samples = fmt.read(handle, path)
    except UnicodeDecodeError as err:
        raise InputValueError(f"{path} is not UTF-8 text ({err.reason})") from None
    except (gzip.BadGzipFile, EOFError) as err:
        raise InputValueError(f"{path} is not a readable gzip file ({err})") from None
    if not samples:
        raise InputValueError(f"{path} holds no sample")
    return samples


LABEL_WORD = "label="  # a FASTA header's word naming the class a sample was drawn for
LABEL_FIELD = "label"  # the same in a .jsonl line


def read_sample_labels(path: str | os.PathLike) -> list[str | None]:
    """The class each sample of ``path`` was drawn for, in file order: the ``label=NAME`` word
    of a FASTA record's header, the ``"label"`` field of a ``.jsonl`` line; None for a sample
    that names none (a ``.txt`` file never does). Read ``path`` with ``read_samples`` first:
    it checks the file, and the two lists line up."""
    path = Path(path)
    fmt, _, gzipped = _format_of(path)
    with _open_text(path, gzipped) as handle:
        if fmt is FASTA:
            return [_header_label(line) for line in handle if line.startswith(">")]
        if fmt is JSONL:
            labels = [json.loads(line).get(LABEL_FIELD) for line in handle if line.strip()]
            return [None if label is None else str(label) for label in labels]
        return [None] * len(fmt.read(handle, path))


def _header_label(header: str) -> str | None:
    """NAME of the first ``label=NAME`` word after a FASTA record's id; None without one."""
    words = header[1:].split()[1:]
    return next((w[len(LABEL_WORD) :] for w in words if w.startswith(LABEL_WORD)), None)


def fasta_template(path: Path) -> str:
    """The sequence of the first record of a FASTA file (plain, gzip or BGZF)."""
    from Bio.SeqIO import parse as parse_records

    from genodiff.data.genome import fasta_errors, open_fasta

    with fasta_errors(path), open_fasta(path) as handle:
        text = handle.read()
    if not text.strip():
        raise InputValueError(f"infill FASTA {path} is empty")
    if not text.lstrip().startswith(">"):
        raise InputValueError(f"{path} is not FASTA: it must start with a '>name' header line")
    record = next(parse_records(io.StringIO(text), "fasta"))
    if not record.seq:
        raise InputValueError(f"the first record of {path} ({record.id}) has no sequence")
    return str(record.seq)


def line_template(path: Path) -> str:
    """The first non-empty line of a UTF-8 text file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise InputValueError(f"infill file {path} is not UTF-8 text ({err.reason})") from None
    template = next((line.strip() for line in lines if line.strip()), None)
    if template is None:
        raise InputValueError(
            f"infill file {path} has no text: write the template on its first line"
        )
    return template
