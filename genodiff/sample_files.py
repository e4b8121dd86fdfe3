"""Sample files: writing generated sequences in a format of their domain, and reading any.

The formats themselves are ``genodiff.sample_formats``; a path's suffix picks one (``.gz``
allowed for reading). ``write_samples`` writes a format of the samples' domain
(``Domain.sample_formats``), atomically; ``read_samples`` reads any format of any installed
domain.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import torch
from torch import Tensor

from genodiff import registry
from genodiff.atomic_files import StagedFile, atomic_write, check_writable
from genodiff.domains import Domain, domain_of
from genodiff.errors import (
    InputFileExistsError,
    InputValueError,
    require_output_path,
    require_regular_file,
)
from genodiff.memory import memory_available, size_text
from genodiff.sample_formats import NEUTRAL_FORMATS, SampleFormat, SamplingRun
from genodiff.tokenizers import Tokenizer

# --------------------------------------------------------------------------- which format


def _installed_formats() -> list[tuple[SampleFormat, str | None]]:
    """Every format an installed domain writes, with the domain that owns it (None: neutral)."""
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


def check_sample_file(path: str | os.PathLike, what: str, parameter: str) -> Path:
    """``path`` as a regular file in a format some installed domain reads; the errors name it
    as ``what`` (``"reference"``, ``"training file"``) and pass ``parameter``, so that an input
    other than the samples is not called a sample file."""
    path = require_regular_file(path, what, parameter)
    try:
        _format_of(path)
    except InputValueError as err:
        raise InputValueError(f"{what} {err}", parameter=parameter) from None
    return path


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


def sample_alphabet(*paths: str | os.PathLike | None) -> str:
    """The ``alphabet`` of the samples in ``paths`` (None entries skipped): that of the domain
    whose own format the first of them in such a format is in (FASTA: DNA's); when every one
    is in a domain-neutral format (.txt, .jsonl), that of the one domain that declares an
    alphabet. ValueError when that domain declares none, or no or several domains do."""
    domains = registry.available("domain")
    owners = [owner for path in paths if path is not None and (owner := format_owner(path))]
    if owners:
        alphabet = domains[owners[0]].alphabet
        if alphabet is None:
            raise InputValueError(
                f"{owners[0]} samples are not strings of a few letters (the {owners[0]} domain "
                "declares no alphabet): the sequence metrics do not apply to them"
            )
        return alphabet
    declared = {name: d.alphabet for name, d in domains.items() if d.alphabet is not None}
    if len(declared) != 1:
        files = ", ".join(str(path) for path in paths if path is not None)
        raise InputValueError(
            f"cannot tell the letters of the samples in {files} from their format: the domains "
            f"{', '.join(sorted(declared)) or '(none)'} declare an alphabet; give the samples "
            "in their domain's own format (DNA: FASTA)"
        )
    return next(iter(declared.values()))


# --------------------------------------------------------------------------- writing

#: Bounds on a finished sample file that ``--resume`` reads back (``SampleStream``): bytes a
#: sample's name and provenance take, and bytes one decoded token takes (a DNA letter: 1).
MAX_BYTES_PER_SAMPLE = 4096
MAX_BYTES_PER_TOKEN = 64


def output_path(path: str | os.PathLike) -> Path:
    """``path`` as the file samples are written to, ``~`` expanded as ``genodiff.load``
    expands it; InputValueError for a value that is no path (None, a number)."""
    return require_output_path(path, "the output file")


def check_output(
    path: str | os.PathLike, domain: Domain, inputs: Sequence[tuple[str, str | os.PathLike]] = ()
) -> Path:
    """``path`` as a place ``write_samples`` may write samples of ``domain`` to (``~``
    expanded, as ``genodiff.load`` expands it); ValueError for a format the domain does not
    write (by suffix), a folder, a file that is one of ``inputs`` ((what, path) pairs: the
    checkpoint, the infilling template, ...), which the samples would overwrite, or a place
    that cannot be written (``check_writable``), and for a ``path`` that is no path."""
    path = output_path(path)
    suffix = path.suffix.lower()
    written = any(suffix in fmt.suffixes for fmt in domain.sample_formats)
    if path.is_dir():  # whatever its suffix: the user named a folder to write into
        example = path / ("samples" + suffix if written else domain.samples_file)
        raise InputValueError(
            f"{path} is a folder; name a file in it, e.g. {example}", parameter="out"
        )
    if not written:
        usable = _listing(domain.sample_formats)
        found = _lookup(suffix)
        if found is not None:
            raise InputValueError(
                f"{path}: {found[0].name} holds {found[1]} samples, these are {domain.name} "
                f"samples; use {usable}",
                parameter="out",
            )
        if suffix == ".gz":  # read everywhere, never written: say so
            raise InputValueError(
                f"{path}: samples are written uncompressed (gzip the file afterwards: every "
                f"reader takes it); use {usable}",
                parameter="out",
            )
        raise InputValueError(
            f"{path}: unknown output format {suffix or '(no suffix)'!r}; use {usable}",
            parameter="out",
        )
    for what, source in inputs:
        if path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise InputValueError(
                f"{path} is the {what} this command reads ({source}); writing the samples "
                "there would destroy it: choose another output file",
                parameter="out",
            )
    check_writable(path, "out")  # now, not after the sampling
    return path


def write_samples(
    samples: Tensor,
    path: str | os.PathLike,
    run: SamplingRun,
    tokenizer: Tokenizer,
    inputs: Sequence[tuple[str, str | os.PathLike]] = (),
    overwrite: bool = False,
    indices: Sequence[int] | None = None,
) -> Path:
    """Write one sample per row of ``samples`` (n, L), decoded by ``tokenizer``, to ``path``
    in the format its suffix names (one its domain writes), atomically; the samples are named
    ``sample_<i>_seed<S>``, i each row's index in ``run`` (``indices``, n of them; default
    0, 1, ..., n - 1). ``path`` is checked first (``check_output``, never one of ``inputs``);
    an existing ``path`` is refused unless ``overwrite``."""
    domain = domain_of(tokenizer)
    path = check_output(path, domain, inputs)
    if path.exists() and not overwrite:
        raise InputFileExistsError(
            f"{path} exists: choose another file, or overwrite it (overwrite=True)",
            parameter=("out", "overwrite"),
        )
    with atomic_write(path) as handle:
        rows = range(len(samples)) if indices is None else indices
        handle.write(_formatted(_format_for(domain, path), rows, samples, run, tokenizer))
    return path


class SampleStream:
    """Samples written to ``path`` as they are drawn, batch by batch, complete or not at all
    (``genodiff.atomic_files.StagedFile``): the same bytes ``write_samples`` writes for all of
    them at once. A killed run leaves its staged file; ``resume=True`` goes on after its last
    complete batch (``done`` samples are written), when its run, number and ``length`` of
    samples and ``stamp`` (what else must not change between a run and its resumption, e.g.
    the number of processes) are the same. ``block``: the file holds these samples of the run
    only (a process's share; default: all ``num_samples``). ``path`` is checked first
    (``check_output``); an existing ``path`` is refused unless ``overwrite``, or ``resume``
    with nothing staged finds it this run's finished file (``complete``: it is left as it is;
    any other file is then refused unless ``overwrite``, and replaced). ``companions``: the
    files the run's other processes write their shares into (``StagedFile``)."""

    def __init__(
        self,
        path: str | os.PathLike,
        run: SamplingRun,
        tokenizer: Tokenizer,
        num_samples: int,
        length: int,
        inputs: Sequence[tuple[str, str | os.PathLike]] = (),
        resume: bool = False,
        overwrite: bool = False,
        stamp: dict[str, Any] | None = None,
        block: range | None = None,
        companions: Sequence[Path] = (),
    ) -> None:
        self.block = range(num_samples) if block is None else block
        if block is not None:
            stamp = {**(stamp or {}), "block": [block.start, block.stop]}
        domain = domain_of(tokenizer)
        self.path = check_output(path, domain, inputs)
        self.format = _format_for(domain, self.path)
        self.run, self.tokenizer = run, tokenizer
        self.stage = StagedFile(
            self.path,
            {"run": run.describe(), "num_samples": num_samples, "length": length, **(stamp or {})},
            resume,
            overwrite,
            companions,
        )
        finished = resume and not self.stage.staged.exists() and self.path.exists()
        try:
            self.complete = finished and self._holds_this_run(length)
        except BaseException:
            self.release()
            raise
        if finished and not self.complete and not overwrite:  # else: replaced when written
            self.release()
            raise InputFileExistsError(
                f"{self.path} exists and is not this command's finished file "
                f"({len(self.block)} samples, named and described as this run names them), and "
                "nothing is staged to resume: choose another output file, or overwrite it",
                parameter=("out", "overwrite"),
            )

    def _holds_this_run(self, length: int) -> bool:
        """Whether ``path`` is what this run writes, its sequences aside: the samples of
        ``block``, named and described as this run names and describes them (the samples read
        back and written again give its bytes; their length is not recorded in the file). A
        larger file than such samples of ``length`` tokens can take (``MAX_BYTES_PER_TOKEN``
        each, ``MAX_BYTES_PER_SAMPLE`` more) is not read."""
        count = len(self.block)
        limit = count * (MAX_BYTES_PER_SAMPLE + MAX_BYTES_PER_TOKEN * length)
        text, texts = "", []
        if self.path.is_file() and self.path.stat().st_size <= limit:
            try:
                text = self.path.read_bytes().decode("utf-8")
                texts = self.format.read(io.StringIO(text), self.path)
            except (UnicodeDecodeError, InputValueError):
                text, texts = "", []
        rows = range(self.block.start, self.block.start + len(texts))
        written = _formatted_texts(self.format, rows, texts, self.run)
        return len(texts) == count and written == text

    @property
    def done(self) -> int:
        """The samples of ``block`` written so far (all of them once ``complete``)."""
        return len(self.block) if self.complete else self.stage.done

    def write(self, start: int, samples: Tensor) -> None:
        """Add the batch ``samples`` (n, L) whose first sample is sample ``start`` of the run."""
        rows = range(start, start + len(samples))
        text = _formatted(self.format, rows, samples, self.run, self.tokenizer)
        self.stage.append(text, len(samples))

    def append_file(self, path: Path, items: int) -> None:
        """Add the samples already written to ``path`` (``items`` of them, formatted as this
        stream formats them: another process's share of the run)."""
        self.stage.append(path.read_text(encoding="utf-8"), items)

    def finish(self) -> Path:
        """The complete file at ``path``."""
        if self.complete:
            self.stage.release()
            return self.path
        return self.stage.commit()

    def release(self) -> None:
        """Stop writing (a failed run: its staged work is kept for ``resume``) and let another
        writer take ``path``."""
        self.stage.release()


def _format_for(domain: Domain, path: Path) -> SampleFormat:
    return next(f for f in domain.sample_formats if path.suffix.lower() in f.suffixes)


def _formatted(
    fmt: SampleFormat,
    indices: Sequence[int],
    samples: Tensor,
    run: SamplingRun,
    tokenizer: Tokenizer,
) -> str:
    """The text ``fmt`` writes for ``samples`` (n, L), row j named ``sample_<i>_seed<S>`` with
    i = ``indices[j]``, its index in ``run``."""
    texts = [tokenizer.decode_sample(row.tolist()) for row in samples]
    return _formatted_texts(fmt, indices, texts, run)


def _formatted_texts(
    fmt: SampleFormat, indices: Sequence[int], texts: Sequence[str], run: SamplingRun
) -> str:
    """The text ``fmt`` writes for the decoded samples ``texts``, named as ``_formatted``."""
    names = [f"sample_{i}_seed{run.seed}" for i in indices]
    buffer = io.StringIO()
    fmt.write(buffer, names, texts, run)
    return buffer.getvalue()


# --------------------------------------------------------------------------- reading


#: The share of the host's physical memory the text of one sample file may take, decompressed:
#: its samples are held whole, several times over while they are read and evaluated (a
#: record's lines and their join, the samples, their upper-case copies).
SAMPLE_TEXT_SHARE = 8


def sample_text_limit() -> int:
    """The most bytes of text read from one sample file on this machine: an eighth
    (``SAMPLE_TEXT_SHARE``) of the host's physical memory."""
    return memory_available(torch.device("cpu"))[1] // SAMPLE_TEXT_SHARE


class _BoundedBytes(io.RawIOBase):
    """The bytes of the binary ``handle`` of the sample file ``path`` (decompressed, where it
    is gzipped), read as they are until a read goes past byte ``limit`` of the file, then an
    InputValueError. A text reader above reads a chunk at a time, a line without end too, so
    a gzip bomb costs ``limit`` bytes of memory and their decompression, not its whole text."""

    def __init__(self, handle: IO[bytes], path: Path, limit: int) -> None:
        self._handle, self._path, self._limit = handle, path, limit
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._handle.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._position = self._handle.seek(offset, whence)
        return self._position

    def readinto(self, buffer: Any) -> int:
        read = self._handle.readinto(buffer)
        self._position += read
        if self._position > self._limit:
            raise InputValueError(
                f"{self._path} holds more than {size_text(self._limit)} of text (reading "
                f"stopped after {size_text(self._position)}), more than one sample file may take "
                f"on this machine (1/{SAMPLE_TEXT_SHARE} of its memory): every sample is held "
                "in memory. Split the file and evaluate the parts one by one, or evaluate "
                "fewer samples"
            )
        return read

    def close(self) -> None:
        self._handle.close()
        super().close()


def _open_text(path: Path, gzipped: bool) -> IO[str]:
    """``path`` open as UTF-8 text, read at most ``sample_text_limit()`` bytes of it."""
    limit = sample_text_limit()
    binary = gzip.open(path, "rb") if gzipped else open(path, "rb")  # noqa: SIM115 (the text closes it)
    bounded = _BoundedBytes(binary, path, limit)
    return io.TextIOWrapper(io.BufferedReader(bounded), encoding="utf-8")


def _read_with(path: Path, read: Callable[[IO[str], Path], Any]) -> Any:
    """What ``read`` (a format's reader) returns for the file ``path`` (a regular file, in a
    known format), reading at most ``sample_text_limit()`` bytes of it (``_BoundedBytes``); what
    reading a damaged, non-text or too large file raises (bytes that are no UTF-8, a gzip
    stream cut short or corrupt, JSON nested deeper than Python's parser goes, text past the
    limit: a gzip bomb) as one InputValueError naming it."""
    try:
        with _open_text(path, _format_of(path)[2]) as handle:
            return read(handle, path)
    except UnicodeDecodeError as err:
        raise InputValueError(f"{path} is not UTF-8 text ({err.reason})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise InputValueError(
            f"{path} is not a readable gzip file ({err}); restore it, or write it again"
        ) from None
    except RecursionError:
        raise InputValueError(
            f"{path} holds a record nested deeper than any sample file's; a sample file holds "
            "one sample per record"
        ) from None


def read_samples(path: str | os.PathLike) -> list[str]:
    """The samples in ``path``, in any format of an installed domain (FASTA: every record's
    sequence; ``.txt``: every line, stripped, a blank one an empty sample; ``.jsonl``: every
    non-blank line's ``"text"``), gzipped or not: a file reads back as the samples written to
    it, an empty one (a text model's that ended at once) included. ValueError on an unknown
    format, a file of no or only empty samples, an empty FASTA record, a malformed line
    (named by its number), or a file that is no text or no readable gzip."""
    path = Path(path)
    fmt = _format_of(path)[0]
    require_regular_file(path, "sample file")
    samples = _read_with(path, fmt.read)
    if not any(samples):
        empty = f": its {len(samples)} samples are empty" if samples else ""
        raise InputValueError(f"{path} holds no sample{empty}")
    return samples


def read_sample_labels(path: str | os.PathLike) -> list[str | None]:
    """The class each sample of ``path`` was drawn for, in file order, as its format names it
    (``SampleFormat.read_labels``: a FASTA header's ``label=NAME`` word, a ``.jsonl`` line's
    ``"label"`` field); None for a sample that names none (a ``.txt`` file never does). Read
    ``path`` with ``read_samples`` first: it checks the file, and the two lists line up (a
    file that no longer reads is refused as ``read_samples`` refuses it)."""
    path = Path(path)
    fmt = _format_of(path)[0]
    require_regular_file(path, "sample file")
    if fmt.read_labels is None:
        return [None] * len(_read_with(path, fmt.read))
    return _read_with(path, fmt.read_labels)
