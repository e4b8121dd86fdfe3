"""One way to write a file so that a reader never sees half of it.

``atomic_write(path)`` opens a hidden temporary file beside ``path``; when the ``with`` block
ends normally the file is flushed, fsynced and renamed over ``path`` (and the folder fsynced,
so the rename itself reaches the disk). When the block raises, the temporary file is removed
and ``path`` is untouched: the old file stays whole, or no file appears. Every writer in
genodiff that replaces a file (checkpoints, exported folders, tokenizer records, sample files,
reports, decompressed downloads) goes through it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

TEMPORARY_SUFFIX = ".tmp"


def temporary_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: a hidden file beside it,
    unique to this process."""
    return path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")


def remove_temporary_files(folder: Path) -> None:
    """Delete what a killed writer left in ``folder`` (call it while no writer runs there)."""
    for leftover in folder.glob(f".*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)


def fsync_path(path: Path) -> None:
    """fsync a file or a folder by name (a folder: the renames made in it)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


@contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8", **open_kwargs: Any
) -> Iterator[IO]:
    """Write ``path`` all at once or not at all; yields the open temporary file.

    ``mode`` is ``"w"`` (text, ``encoding``) or ``"wb"`` (bytes). The parent folder is created
    when missing. An exception inside the block (including KeyboardInterrupt) leaves ``path`` as
    it was and no temporary file behind.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes whole files: mode 'w' or 'wb', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_path(path)
    text = {"encoding": encoding} if mode == "w" else {}
    try:
        with open(temporary, mode, **text, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    fsync_path(path.parent)
