"""One way to write a file so that a reader never sees half of it.

``atomic_write(path)`` opens a hidden temporary file beside ``path``; when the ``with`` block
ends normally the file is flushed, fsynced and renamed over ``path`` (and the folder fsynced,
so the rename itself reaches the disk). When the block raises, the temporary file is removed
and ``path`` is untouched: the old file stays whole, or no file appears. Every writer in
genodiff that replaces a file (checkpoints, exported folders, tokenizer records, sample files,
reports, decompressed downloads) goes through it.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from genodiff.errors import DiskFullError
from genodiff.memory import size_text

TEMPORARY_SUFFIX = ".tmp"
# What a write onto a full disk fails with, and how to say it.
DISK_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


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
    path: str | os.PathLike,
    mode: str = "w",
    encoding: str | None = "utf-8",
    expected_bytes: int | None = None,
    **open_kwargs: Any,
) -> Iterator[IO]:
    """Write ``path`` all at once or not at all; yields the open temporary file.

    ``mode`` is ``"w"`` (text, ``encoding``) or ``"wb"`` (bytes). The parent folder is created
    when missing. An exception inside the block (including KeyboardInterrupt) leaves ``path`` as
    it was and no temporary file behind. A full disk (ENOSPC, EDQUOT anywhere in what the block
    raised: torch's writer reports it as a RuntimeError over the OSError) is a
    ``DiskFullError`` naming ``path``, ``expected_bytes`` (about what the file needs) when given,
    and the space left.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes whole files: mode 'w' or 'wb', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_path(path)
    text = {"encoding": encoding} if mode == "w" else {}
    existed = path.exists()
    try:
        with open(temporary, mode, **text, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except Exception as err:
        disk_errno = _disk_full_errno(err)
        if disk_errno is None:
            raise
        temporary.unlink(missing_ok=True)  # before measuring what is free
        raise DiskFullError(
            disk_errno, _disk_full_message(path, disk_errno, expected_bytes, existed)
        ) from err
    finally:
        temporary.unlink(missing_ok=True)
    fsync_path(path.parent)


def _disk_full_errno(err: BaseException) -> int | None:
    """ENOSPC or EDQUOT when ``err`` or an exception it was raised from or while handling is an
    OSError with that errno; else None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL:
            return err.errno
        err = err.__cause__ or err.__context__
    return None


def _disk_full_message(path: Path, disk_errno: int, expected: int | None, existed: bool) -> str:
    needed = f"about {size_text(expected)} needed, " if expected is not None else ""
    free = size_text(shutil.disk_usage(path.parent).free)
    kept = f"the previous {path.name} is kept as it was" if existed else f"no {path.name} written"
    return (
        f"{DISK_FULL[disk_errno]} writing {path} ({needed}{free} free there); {kept}. Free some "
        "space, or write to another disk"
    )
