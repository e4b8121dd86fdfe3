"""Random access to a FASTA genome (plain text or BGZF-compressed) through pyfaidx.

Where the index goes: ``<fasta>.fai`` (and ``<fasta>.gzi`` for BGZF) next to the FASTA when
an index that fits the file (checked against its layout, not only its mtime: see
``_index_matches``) is already there (read only), or when that folder is writable and not part
of the installed genodiff package (``genodiff.resources.is_shipped``: the genomes a wheel ships
get no file written beside them, which would outlive ``pip uninstall``); otherwise in a cache
folder, ``cache_dir`` if given, else ``$GENODIFF_CACHE_DIR``, else
``$XDG_CACHE_HOME/genodiff/fai`` (``~/.cache/genodiff/fai``). Cached index files are named
after a hash of the FASTA's absolute path, so two genomes with the same file name do not clash;
pyfaidx's ``indexname`` and ``gzi_indexname`` options point it there, so no links or copies are
needed. A folder, FIFO or device where an index file would go beside the FASTA is left alone and
the cache folder used.

Records of length 0 are skipped with a warning (they hold no windows); binary content, text
before the first ``>`` header, inconsistent line lengths, duplicate record names and a
truncated BGZF file are errors.
"""

from __future__ import annotations

import bisect
import codecs
import gzip
import hashlib
import math
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pyfaidx

from genodiff.atomic_files import atomic_write
from genodiff.errors import InputKeyError, InputValueError, require_regular_file
from genodiff.resources import is_shipped, user_cache_folder
from genodiff.user_warnings import warn_user

CACHE_ENV_VAR = "GENODIFF_CACHE_DIR"
_GZIP_MAGIC = b"\x1f\x8b"
# The empty block every BGZF file ends with (SAM/BAM spec, section 4.1.2).
_BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
CORRUPT_GZIP_ADVICE = (
    "truncated or corrupt BGZF/gzip file; re-download it or re-compress it with bgzip"
)
# Errors of reading a damaged gzip/BGZF stream (Bio.bgzf and pyfaidx add struct.error, and
# Bio.bgzf a RuntimeError for a block that decompresses to another size or CRC, told apart
# from other RuntimeErrors by its words: ``_gzip_damage``).
_GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, struct.error, RuntimeError)
_BGZF_DAMAGE = ("Decompressed to ", "CRC is ")
_PYFAIDX_UNHANDLED = "Unhandled exception during fasta indexing"  # pyfaidx's RuntimeError


def _gzip_damage(err: BaseException) -> bool:
    """Whether ``err``, one of ``_GZIP_ERRORS``, says a gzip/BGZF stream is damaged: any but a
    RuntimeError, and Bio.bgzf's RuntimeErrors of a damaged block (not, say, pyfaidx's
    "Unhandled exception during fasta indexing")."""
    return not isinstance(err, RuntimeError) or str(err).startswith(_BGZF_DAMAGE)


def default_cache_dir() -> Path:
    """``$GENODIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/genodiff/fai``, else ``~/.cache/...``."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    return user_cache_folder("fai")


def compression(path: str | os.PathLike) -> str:
    """``"bgzf"``, ``"gzip"`` (plain, not block-compressed) or ``"none"``, from the file's bytes."""
    with open(path, "rb") as fh:
        head = fh.read(18)
    if not head.startswith(_GZIP_MAGIC):
        return "none"
    # BGZF = gzip with the FEXTRA flag and a "BC" extra subfield (SAM/BAM spec, section 4.1).
    if len(head) >= 14 and head[3] & 4 and head[12:14] == b"BC":
        return "bgzf"
    return "gzip"


BGZF_BLOCK_BYTES = 65_280  # uncompressed bytes per BGZF block (samtools bgzip's)


def bgzip_fasta(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write ``src`` (plain or gzip FASTA) to ``dest`` as BGZF, the compression pyfaidx reads
    (atomically: ``dest`` is whole or untouched). ``src`` must be a regular file: it is read
    twice (its first bytes tell its compression), and a FIFO would wait for a writer."""
    import gzip

    from Bio import bgzf

    src = require_regular_file(src, "FASTA file", "src")
    opener = gzip.open if compression(src) != "none" else open
    dest = Path(dest)
    # The BGZF writer closes its file when it adds the end marker: it gets its own descriptor
    # of the temporary file, so atomic_write's stays open for the fsync and rename.
    with (
        opener(src, "rb") as fin,
        atomic_write(dest, "wb") as raw,
        bgzf.BgzfWriter(fileobj=os.fdopen(os.dup(raw.fileno()), "wb")) as fout,
    ):
        # Blocks of 65,280 bytes, as samtools' bgzip writes: Biopython's writer fills blocks
        # to 65,536, and pyfaidx then fails on a read starting exactly at a block's end
        # ("Require 0 <= within_block_offset < 2**16"). flush() ends the block.
        while chunk := fin.read(BGZF_BLOCK_BYTES):
            fout.write(chunk)
            fout.flush()
    return dest


# ----------------------------------------------------------------- reading a FASTA as text


def open_fasta(path: str | os.PathLike) -> IO[str]:
    """A text handle on FASTA ``path`` from its first byte: plain, gzip or BGZF, told apart by
    the file's bytes (not its name). For reading a FASTA from start to end (an infilling
    template); ``Genome`` reads by position. Read it inside ``fasta_errors(path)``."""
    path = Path(path)
    if compression(path) == "none":
        return open(path, encoding="utf-8")
    return gzip.open(path, "rt", encoding="utf-8")


@contextmanager
def fasta_errors(path: str | os.PathLike) -> Iterator[None]:
    """Turn what reading a damaged or non-FASTA file raises into a ValueError naming it."""
    try:
        yield
    except UnicodeDecodeError as err:
        raise InputValueError(
            f"{path} is not a FASTA file: it holds binary data ({err.reason}); give a text "
            "FASTA file ('>name' header lines, then bases), plain or compressed"
        ) from None
    except _GZIP_ERRORS as err:
        if not _gzip_damage(err):
            raise
        raise InputValueError(
            f"{path}: {CORRUPT_GZIP_ADVICE} ({err or type(err).__name__})"
        ) from None


def check_fasta_start(path: str | os.PathLike, head: bytes) -> None:
    """ValueError unless ``head``, the first bytes of ``path`` (decompressed), can begin a FASTA
    file: text whose first line that is neither blank nor a ';' comment is a '>' header, with
    line feeds (LF or CRLF) ending its lines."""
    try:  # incremental: a character cut at the end of ``head`` is not an error
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as err:
        text, bad = None, f"byte {head[err.start]:#04x} at offset {err.start} is not text"
    else:
        control = next((i for i, c in enumerate(text) if c < " " and c not in "\t\n\r\f\v"), None)
        bad = None if control is None else f"control character {ord(text[control]):#04x}"
    if bad is not None:
        raise InputValueError(
            f"{path} is not a FASTA file: it holds binary data ({bad}); give a text FASTA file "
            "('>name' header lines, then bases), plain or compressed with bgzip"
        )
    if "\r" in text and "\n" not in text:  # the index reader sees one line: no record at all
        raise InputValueError(
            f"{path} uses CR line endings (a carriage return, no line feed, ends each line), "
            f"which FASTA indexing cannot read; convert them: tr '\\r' '\\n' < {path} > "
            "converted.fa"
        )
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith(";"):
            continue
        if line.startswith(">"):
            return
        raise InputValueError(
            f"malformed FASTA {path}: this is not FASTA: text before the first sequence "
            f"definition line (line {number} starts {line[:20]!r}); a FASTA file starts with a "
            "'>name' header line"
        )


def _fasta_head(path: Path, bgzf: bool, size: int = 1 << 16) -> bytes:
    """The first ``size`` bytes of ``path``, decompressed."""
    with fasta_errors(path), gzip.open(path, "rb") if bgzf else open(path, "rb") as handle:
        return handle.read(size)


def _check_bgzf_complete(path: Path) -> None:
    """ValueError unless ``path`` ends with the BGZF end-of-file block (a cut file does not)."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(max(0, size - len(_BGZF_EOF)))
        tail = handle.read()
    if tail != _BGZF_EOF:
        raise InputValueError(
            f"{path}: {CORRUPT_GZIP_ADVICE} (it does not end with the BGZF end-of-file block)"
        )


#: The longest line a FASTA may have to be indexed: pyfaidx's indexer holds a line whole, about
#: three times over (its bytes, its text, the text stripped), so a chromosome on one line
#: (chr1: 249 MB) is read, a 10 GB line refused before it is.
MAX_LINE_BYTES = 1 << 30


def _check_line_lengths(path: Path, bgzf: bool) -> None:
    """ValueError when a line of ``path`` (decompressed) is longer than ``MAX_LINE_BYTES``,
    found in blocks of at most 16 MiB (a line inside one is no longer): in bounded memory."""
    since, size = 0, min(1 << 24, MAX_LINE_BYTES)  # bytes since the last line break; per block
    with fasta_errors(path), gzip.open(path, "rb") if bgzf else open(path, "rb") as handle:
        while block := handle.read(size):
            last = block.rfind(b"\n")
            line = since + (len(block) if last < 0 else block.find(b"\n"))
            if line > MAX_LINE_BYTES:
                raise InputValueError(
                    f"{path} has a line longer than {MAX_LINE_BYTES:,} bytes, more than FASTA "
                    "indexing holds in memory; wrap its sequence lines, e.g. `seqkit seq -w 60 "
                    "in.fa > out.fa`"
                )
            since = line if last < 0 else len(block) - last - 1


# ----------------------------------------------------------------- is an index current?

# An index is checked against the file's layout, not merely its mtime: `cp -p` and `rsync -a`
# give a replaced FASTA its old mtime, and a stale index then reads the wrong bases. Every
# record (at most _MAX_RECORDS_CHECKED of them, evenly spread) must have its '>name' header
# line right before its offset, its first, middle and last lines of the indexed widths, and
# after the last record nothing but blank lines may follow. For BGZF the .gzi's blocks must
# be the file's. A handful of small reads; any mismatch means the index is rebuilt.
_MAX_RECORDS_CHECKED = 2000
_MAX_GAP = 1 << 20  # at most this many bytes between records (header lines) or after the last
_LINE_END_BYTES = 1 << 16  # of a longer line, this many bytes at each end are checked


class _Uncompressed:
    """Bytes of a FASTA by uncompressed offset: the file itself, or a BGZF file through its
    .gzi (pairs of compressed and uncompressed block starts, every block but the first)."""

    def __init__(self, path: Path, gzi: Path | None) -> None:
        self.handle = open(path, "rb")  # noqa: SIM115 (closed by close())
        self.reader = None
        try:
            if gzi is None:
                self.size = os.fstat(self.handle.fileno()).st_size
                return
            from Bio import bgzf

            raw = gzi.read_bytes()
            (count,) = struct.unpack_from("<Q", raw)
            if len(raw) != 8 + 16 * count:
                raise InputValueError(f"{gzi} is not a .gzi index")
            pairs = struct.unpack_from(f"<{2 * count}Q", raw, 8)
            self.blocks = [(0, 0), *zip(pairs[::2], pairs[1::2], strict=True)]
            self.starts = [u for _, u in self.blocks]
            if any(a >= b for a, b in zip(self.blocks, self.blocks[1:], strict=False)):
                raise InputValueError(f"{gzi}: blocks out of order")
            self.size = self._bgzf_size()
            self.reader = bgzf.BgzfReader(fileobj=self.handle, mode="rb")
        except BaseException:
            self.handle.close()
            raise

    def _block(self, cstart: int) -> tuple[int, int]:
        """(compressed end, uncompressed size) of the BGZF block at ``cstart``."""
        self.handle.seek(cstart)
        header = self.handle.read(12)
        if len(header) < 12 or header[:4] != b"\x1f\x8b\x08\x04":
            raise InputValueError(f"no BGZF block at {cstart}")
        (xlen,) = struct.unpack("<H", header[10:12])
        extra, i, bsize = self.handle.read(xlen), 0, None
        while i + 4 <= len(extra):
            (slen,) = struct.unpack("<H", extra[i + 2 : i + 4])
            if extra[i : i + 2] == b"BC" and slen == 2:
                (bsize,) = struct.unpack("<H", extra[i + 4 : i + 6])
            i += 4 + slen
        if bsize is None:
            raise InputValueError(f"no BGZF block at {cstart}")
        end = cstart + bsize + 1
        self.handle.seek(end - 4)
        (isize,) = struct.unpack("<I", self.handle.read(4))
        return end, isize

    def _bgzf_size(self) -> int:
        """The uncompressed size; ValueError unless the .gzi's blocks are the file's."""
        file_size = os.fstat(self.handle.fileno()).st_size
        spread = max(1, len(self.blocks) // 64)
        for i in range(0, len(self.blocks) - 1, spread):  # a sample of the blocks follow on
            end, isize = self._block(self.blocks[i][0])
            if (end, self.blocks[i][1] + isize) != self.blocks[i + 1]:
                raise InputValueError("the .gzi does not list this file's blocks")
        cstart, ustart = self.blocks[-1]
        end, isize = self._block(cstart)
        if end == file_size and isize == 0:  # the index lists the end-of-file block too
            return ustart
        if end + len(_BGZF_EOF) == file_size:
            return ustart + isize
        raise InputValueError("the .gzi's last block is not the file's")

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        if self.reader is None:
            self.handle.seek(offset)
            return self.handle.read(n)
        from Bio import bgzf

        cstart, ustart = self.blocks[bisect.bisect_right(self.starts, offset) - 1]
        self.reader.seek(bgzf.make_virtual_offset(cstart, offset - ustart))
        return self.reader.read(n)

    def close(self) -> None:
        self.handle.close()


def _fai_rows(fai: Path) -> list[tuple[str, int, int, int, int]]:
    """(name, length, offset, bases per line, bytes per line) of every .fai line."""
    rows = []
    for line in fai.read_text(encoding="utf-8").splitlines():
        if line.strip():
            name, length, offset, bases, width = line.split("\t")
            rows.append((name, int(length), int(offset), int(bases), int(width)))
    return rows


def _record_end(length: int, offset: int, bases: int, width: int) -> int:
    """Where a record's bytes end (after its last line break), as pyfaidx computes it."""
    return offset + length + (math.ceil(length / bases) * (width - bases) if bases else 0)


def _header_fits(gap: bytes, name: str) -> bool:
    """Whether the bytes between two records are blank/';' lines, then the '>' header of
    ``name``, ending with its line break."""
    lines = gap.decode("utf-8").splitlines()
    if not gap.endswith(b"\n") or not lines or not lines[-1].startswith(">"):
        return False
    words = lines[-1][1:].split()
    return (
        bool(words)
        and words[0] == name
        and all(not line.strip() or line.startswith(";") for line in lines[:-1])
    )


def _lines_fit(data: _Uncompressed, length: int, offset: int, bases: int, width: int) -> bool:
    """Whether the first, middle and last lines of a record have the indexed widths."""
    if length == 0:
        return True
    if bases < 1 or width <= bases:
        return False
    lines = math.ceil(length / bases)
    for k in sorted({0, lines // 2, lines - 1}):
        start = offset + k * width
        chars = bases if k < lines - 1 else length - k * bases
        # a long line (a chromosome on one line) is checked at its two ends, not read whole
        head = data.read(start, _LINE_END_BYTES) if chars > _LINE_END_BYTES else b""
        seen = min(chars, _LINE_END_BYTES)
        chunk = data.read(start + chars - seen, seen + width - bases)
        text, newline = head + chunk[:seen], chunk[seen:]
        if len(text) != len(head) + seen or any(c in text for c in b"\r\n>"):
            return False
        at_end = start + chars == data.size and k == lines - 1
        if newline not in (b"\n", b"\r\n")[: width - bases] and not (at_end and not newline):
            return False
    return True


def _index_matches(fasta: Path, fai: Path, gzi: Path | None) -> bool:
    """Whether ``fai`` (and for BGZF ``gzi``) describe ``fasta`` as it is now (see above)."""
    if not fai.is_file() or (gzi is not None and not gzi.is_file()):
        return False
    try:
        rows = _fai_rows(fai)
        data = _Uncompressed(fasta, gzi)
    except (OSError, ValueError, struct.error):
        return False
    try:
        ends = [_record_end(*row[1:]) for row in rows]
        starts = [0, *ends[:-1]]  # where each record's header line may begin
        if not rows or any(row[2] < start for row, start in zip(rows, starts, strict=True)):
            return False
        spread = max(1, len(rows) // _MAX_RECORDS_CHECKED)
        for i in sorted({*range(0, len(rows), spread), len(rows) - 1}):
            name, length, offset, bases, width = rows[i]
            gap = offset - starts[i]
            if gap > _MAX_GAP or not _header_fits(data.read(starts[i], gap), name):
                return False
            if not _lines_fit(data, length, offset, bases, width):
                return False
        last_break = rows[-1][4] - rows[-1][3]
        tail = data.size - ends[-1]
        if not -last_break <= tail <= _MAX_GAP:  # a file may lack its final line break
            return False
        return not data.read(ends[-1], tail).strip()
    except (OSError, ValueError, *_GZIP_ERRORS) as err:
        if not _gzip_damage(err):
            raise
        return False
    finally:
        data.close()


def _remove_index(fai: Path, gzi: Path | None) -> None:
    for path in (fai, gzi):
        if path is not None:
            path.unlink(missing_ok=True)


# ----------------------------------------------------------------- where the index goes


def _dir_is_writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _exists(path: Path) -> bool:
    """Whether anything is at ``path``: a file, a folder, a FIFO, a link (a broken one too)."""
    return path.is_symlink() or path.exists()


def _is_fresh(index: Path, fasta: Path) -> bool:
    return index.exists() and index.stat().st_mtime >= fasta.stat().st_mtime


def index_files_beside(fasta: str | os.PathLike) -> tuple[Path, Path]:
    """The ``.fai`` and ``.gzi`` index files of ``fasta`` in its own folder, where they go
    when that folder is writable (see the module docstring)."""
    return Path(f"{fasta}.fai"), Path(f"{fasta}.gzi")


def index_paths(fasta: Path, bgzf: bool, cache_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    """Where the ``.fai`` and ``.gzi`` of ``fasta`` live (see the module docstring). An index
    there that does not describe the file as it is now (``_index_matches``) is removed, so that
    pyfaidx builds it afresh; where the FASTA's folder is read-only or genodiff's installed
    package, the cache folder's."""
    beside = index_files_beside(fasta)
    current = _index_matches(fasta, beside[0], beside[1] if bgzf else None)
    # pyfaidx rebuilds an index older than the FASTA, so a read-only one must be newer too.
    fresh = _is_fresh(beside[0], fasta) and (not bgzf or _is_fresh(beside[1], fasta))
    if current and fresh:
        return beside
    shipped = is_shipped(fasta)
    # a folder or FIFO of an index's name is the user's: neither removed nor read
    taken = [p for p in beside[: 2 if bgzf else 1] if _exists(p) and not p.is_file()]
    if _dir_is_writable(fasta.parent) and not shipped and not taken:
        if not current:
            _remove_index(beside[0], beside[1] if bgzf else None)
        return beside
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        writable = _dir_is_writable(folder)
    except OSError as err:
        writable, reason = False, err.strerror or str(err)
    else:
        reason = "not writable"
    if not writable:
        if cache_dir is not None:
            source = "data.cache_dir"
        else:
            source = f"${CACHE_ENV_VAR}" if os.environ.get(CACHE_ENV_VAR) else "the default"
        where = (
            "it ships inside the genodiff package"
            if shipped
            else f"{taken[0]} is no index file"
            if taken
            else "its folder is read-only"
        )
        raise PermissionError(
            f"cannot index {fasta}: {where}, so the index goes to the cache "
            f"folder {folder} ({source}), which cannot be used: {reason}. Point data.cache_dir "
            f"(or ${CACHE_ENV_VAR}) at a writable folder for the index"
        )
    tag = hashlib.sha256(str(fasta.resolve()).encode()).hexdigest()[:16]
    cached = (folder / f"{tag}-{fasta.name}.fai", folder / f"{tag}-{fasta.name}.gzi")
    if not _index_matches(fasta, cached[0], cached[1] if bgzf else None):
        _remove_index(cached[0], cached[1] if bgzf else None)
    return cached


class Genome:
    """Named sequences of one FASTA file, read lazily by 0-based half-open interval.

    The pyfaidx handle is opened on first use in each process and never pickled, so a
    ``Genome`` can be handed to DataLoader workers (forked or spawned).
    """

    def __init__(self, path: str | os.PathLike, cache_dir: str | os.PathLike | None = None):
        self.path = require_regular_file(path, "FASTA file")  # a FIFO would block the index
        kind = compression(self.path)
        if kind == "gzip":
            raise InputValueError(
                f"{self.path} is plain gzip, which allows no random access. Either decompress "
                f"it (`gunzip {self.path}`) or re-compress it as BGZF (`gunzip -c {self.path} | "
                "bgzip > out.fa.gz`, or genodiff.data.genome.bgzip_fasta(src, dest))"
            )
        gz_name = self.path.name.lower().endswith((".gz", ".bgz"))
        if (kind == "bgzf") != gz_name:
            raise InputValueError(
                f"{self.path}: the file name says {'gzip' if gz_name else 'plain text'} but the "
                f"contents are {'plain text' if gz_name else 'BGZF'}; rename it so that BGZF "
                "files end in .gz and plain FASTA files do not"
            )
        if kind == "bgzf":
            _check_bgzf_complete(self.path)
        check_fasta_start(self.path, _fasta_head(self.path, kind == "bgzf"))
        self._fai, self._gzi = index_paths(self.path, kind == "bgzf", cache_dir)
        if not (self._fai.is_file() and _is_fresh(self._fai, self.path)):
            # pyfaidx builds it (none, or older than the FASTA: it rebuilds those): a line is
            # held whole
            _check_line_lengths(self.path, kind == "bgzf")
        self._handle: pyfaidx.Fasta | None = None
        self._pid: int | None = None
        lengths = {name: len(record) for name, record in self._open().records.items()}
        empty = [name for name, n in lengths.items() if n == 0]
        if empty:
            warn_user(f"{self.path}: skipping {len(empty)} empty record(s): {', '.join(empty[:5])}")
        self.lengths: dict[str, int] = {k: n for k, n in lengths.items() if n > 0}
        if not self.lengths:
            raise InputValueError(f"{self.path} holds no sequence: every record is empty")

    def _open(self) -> pyfaidx.Fasta:
        # Reopen after a fork: a shared file offset between processes would corrupt reads.
        if self._handle is None or self._pid != os.getpid():
            try:
                self._handle = pyfaidx.Fasta(
                    str(self.path),
                    indexname=str(self._fai),
                    gzi_indexname=str(self._gzi),
                    as_raw=True,
                    sequence_always_upper=False,
                )
            except pyfaidx.FastaIndexingError as err:
                raise InputValueError(f"malformed FASTA {self.path}: {err}") from None
            except UnicodeDecodeError as err:
                raise InputValueError(
                    f"{self.path} is not a FASTA file: it holds binary data ({err.reason}); give "
                    "a text FASTA file ('>name' header lines, then bases), plain or bgzip'd"
                ) from None
            except _GZIP_ERRORS as err:
                said = str(err)
                if said.startswith(_PYFAIDX_UNHANDLED):  # a line layout it does not index
                    said = said.split("Please report")[0].strip()
                    raise InputValueError(f"malformed FASTA {self.path}: {said}") from None
                if not _gzip_damage(err):
                    raise
                raise InputValueError(
                    f"{self.path}: {CORRUPT_GZIP_ADVICE} ({err or type(err).__name__})"
                ) from None
            except ValueError as err:
                hint = "record names (the first word after '>') must be unique"
                duplicate = str(err).startswith("Duplicate key")  # pyfaidx's words for it
                raise InputValueError(
                    f"malformed FASTA {self.path}: {err}" + (f"; {hint}" if duplicate else "")
                ) from None
            self._pid = os.getpid()
        return self._handle

    @property
    def names(self) -> list[str]:
        """Record names in file order (empty records excluded)."""
        return list(self.lengths)

    def length(self, name: str) -> int:
        self._check_name(name)
        return self.lengths[name]

    def _check_name(self, name: str) -> None:
        if name not in self.lengths:
            shown = ", ".join(self.names[:10]) + (", ..." if len(self.lengths) > 10 else "")
            raise InputKeyError(
                f"no sequence named {name!r} in {self.path} ({len(self.lengths)} records: {shown})"
            )

    def fetch(self, name: str, start: int, end: int) -> str:
        """Bases ``[start, end)`` (0-based) of record ``name``, case as stored in the file."""
        self._check_name(name)
        if not 0 <= start <= end <= self.lengths[name]:
            raise IndexError(
                f"interval [{start}, {end}) is outside {name!r} (length {self.lengths[name]})"
            )
        record = self._open()[name]
        try:
            try:
                return record[start:end]
            except ValueError as err:
                # pyfaidx cannot start a read at the very end of a full 65,536-byte BGZF block
                # (Biopython's block size; genodiff's bgzip_fasta wrote such blocks before
                # 2026-11-27): start one base earlier, inside that block, and drop it
                if "within_block_offset" not in str(err) or start == 0:
                    raise
                return record[start - 1 : end][1:]
        except _GZIP_ERRORS as err:  # a block damaged after the index was built
            if not _gzip_damage(err):
                raise
            raise InputValueError(
                f"{self.path}: {CORRUPT_GZIP_ADVICE} ({err or type(err).__name__})"
            ) from None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_handle": None, "_pid": None}

    def __repr__(self) -> str:
        return f"Genome({str(self.path)!r}, {len(self.lengths)} records)"
