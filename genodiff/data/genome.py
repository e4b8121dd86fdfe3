"""Random access to a FASTA genome (plain text or BGZF-compressed) through pyfaidx.

Where the index goes: ``<fasta>.fai`` (and ``<fasta>.gzi`` for BGZF) next to the FASTA when
an up-to-date index is already there or that folder is writable; otherwise in a cache folder,
``cache_dir`` if given, else ``$GENODIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/genodiff/fai``
(``~/.cache/genodiff/fai``). Cached index files are named after a hash of the FASTA's absolute
path, so two genomes with the same file name do not clash; pyfaidx's ``indexname`` and
``gzi_indexname`` options point it there, so no links or copies are needed.

Records of length 0 are skipped with a warning (they hold no windows); text before the first
``>`` header, inconsistent line lengths and duplicate record names are errors.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import pyfaidx

CACHE_ENV_VAR = "GENODIFF_CACHE_DIR"
_GZIP_MAGIC = b"\x1f\x8b"


def default_cache_dir() -> Path:
    """``$GENODIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/genodiff/fai``, else ``~/.cache/...``."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "genodiff" / "fai"


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


def bgzip_fasta(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write ``src`` (plain or gzip FASTA) to ``dest`` as BGZF, the compression pyfaidx reads."""
    import gzip
    import shutil

    from Bio import bgzf

    opener = gzip.open if compression(src) != "none" else open
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    with opener(src, "rb") as fin, bgzf.BgzfWriter(str(tmp), "wb") as fout:
        shutil.copyfileobj(fin, fout)
    os.replace(tmp, dest)
    return dest


def _dir_is_writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _is_fresh(index: Path, fasta: Path) -> bool:
    return index.exists() and index.stat().st_mtime >= fasta.stat().st_mtime


def index_paths(fasta: Path, bgzf: bool, cache_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    """Where the ``.fai`` and ``.gzi`` of ``fasta`` live (see the module docstring)."""
    beside = (Path(f"{fasta}.fai"), Path(f"{fasta}.gzi"))
    fresh = _is_fresh(beside[0], fasta) and (not bgzf or _is_fresh(beside[1], fasta))
    if fresh or _dir_is_writable(fasta.parent):
        return beside
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(str(fasta.resolve()).encode()).hexdigest()[:16]
    return folder / f"{tag}-{fasta.name}.fai", folder / f"{tag}-{fasta.name}.gzi"


class Genome:
    """Named sequences of one FASTA file, read lazily by 0-based half-open interval.

    The pyfaidx handle is opened on first use in each process and never pickled, so a
    ``Genome`` can be handed to DataLoader workers (forked or spawned).
    """

    def __init__(self, path: str | os.PathLike, cache_dir: str | os.PathLike | None = None):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"FASTA file not found: {self.path}")
        kind = compression(self.path)
        if kind == "gzip":
            raise ValueError(
                f"{self.path} is plain gzip, which allows no random access. Either decompress "
                f"it (`gunzip {self.path}`) or re-compress it as BGZF (`gunzip -c {self.path} | "
                "bgzip > out.fa.gz`, or genodiff.data.genome.bgzip_fasta(src, dest))"
            )
        gz_name = self.path.name.lower().endswith((".gz", ".bgz"))
        if (kind == "bgzf") != gz_name:
            raise ValueError(
                f"{self.path}: the file name says {'gzip' if gz_name else 'plain text'} but the "
                f"contents are {'plain text' if gz_name else 'BGZF'}; rename it so that BGZF "
                "files end in .gz and plain FASTA files do not"
            )
        self._fai, self._gzi = index_paths(self.path, kind == "bgzf", cache_dir)
        self._handle: pyfaidx.Fasta | None = None
        self._pid: int | None = None
        lengths = {name: len(record) for name, record in self._open().records.items()}
        empty = [name for name, n in lengths.items() if n == 0]
        if empty:
            warnings.warn(
                f"{self.path}: skipping {len(empty)} empty record(s): {', '.join(empty[:5])}",
                stacklevel=2,
            )
        self.lengths: dict[str, int] = {k: n for k, n in lengths.items() if n > 0}
        if not self.lengths:
            raise ValueError(f"{self.path} holds no sequence: every record is empty")

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
                raise ValueError(f"malformed FASTA {self.path}: {err}") from None
            except ValueError as err:  # pyfaidx reports duplicate record names this way
                raise ValueError(
                    f"malformed FASTA {self.path}: {err}; record names (the first word after "
                    "'>') must be unique"
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
            raise KeyError(
                f"no sequence named {name!r} in {self.path} ({len(self.lengths)} records: {shown})"
            )

    def fetch(self, name: str, start: int, end: int) -> str:
        """Bases ``[start, end)`` (0-based) of record ``name``, case as stored in the file."""
        self._check_name(name)
        if not 0 <= start <= end <= self.lengths[name]:
            raise IndexError(
                f"interval [{start}, {end}) is outside {name!r} (length {self.lengths[name]})"
            )
        return self._open()[name][start:end]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_handle": None, "_pid": None}

    def __repr__(self) -> str:
        return f"Genome({str(self.path)!r}, {len(self.lengths)} records)"
