"""Reading text files of one sentence per line, with errors that say what is wrong.

A file is UTF-8 text, plain or gzip-compressed (recognised by its first bytes, whatever its
name). Lines are numbered from 1 as in an editor; a line holding only whitespace is not a
sentence and is skipped (its number is still counted); a leading byte-order mark and
surrounding whitespace are dropped.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from genodiff.errors import InputFileNotFoundError, InputValueError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = "\ufeff"


def _open(path: Path) -> tuple[BinaryIO, bool]:
    with open(path, "rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    return (gzip.open(path, "rb") if compressed else open(path, "rb")), compressed


def read_lines(path: str | Path, what: str = "text file") -> Iterator[tuple[int, str]]:
    """``(line number, sentence)`` for every non-blank line of ``path``.

    ValueError naming the byte offset for a NUL byte (a binary file) or invalid UTF-8; for a
    gzip file the offset counts decompressed bytes.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileNotFoundError(f"{what} not found: {path}")
    stream, compressed = _open(path)
    where = " (decompressed)" if compressed else ""
    offset = 0
    try:
        with stream:
            for number, raw in enumerate(stream, start=1):
                nul = raw.find(b"\x00")
                if nul >= 0:
                    raise InputValueError(
                        f"{path} is not a text file: NUL byte at byte offset {offset + nul}"
                        f"{where} (line {number}); give a UTF-8 text file with one sentence "
                        "per line"
                    )
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    bad = raw[err.start : err.start + 4]
                    raise InputValueError(
                        f"{path} is not valid UTF-8: byte {bad[:1].hex()} at byte offset "
                        f"{offset + err.start}{where} (line {number}: {err.reason}); convert it "
                        f"to UTF-8 (e.g. iconv -f latin1 -t utf-8 {path.name} > out.txt)"
                    ) from None
                offset += len(raw)
                if number == 1:
                    line = line.removeprefix(UTF8_BOM)
                line = line.strip()
                if line:
                    yield number, line
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise InputValueError(
            f"{path} starts like a gzip file but cannot be decompressed ({err}); give a plain "
            "UTF-8 text file or a valid .gz"
        ) from None


def count_lines(path: str | Path, what: str = "text file") -> int:
    """Number of non-blank lines of ``path``, reading (and so checking) the whole file;
    ValueError when it is empty or has only blank lines."""
    path = Path(path)
    if not path.is_file():
        raise InputFileNotFoundError(f"{what} not found: {path}")
    count = sum(1 for _ in read_lines(path, what))
    if count == 0:
        empty = path.stat().st_size == 0
        raise InputValueError(
            f"{path} is empty"
            + ("" if empty else " of text: it has only blank lines")
            + "; give a UTF-8 text file with one sentence per line"
        )
    return count
