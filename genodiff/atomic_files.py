"""One way to write a file so that a reader never sees half of it.

``atomic_write(path)`` opens a hidden temporary file beside ``path``; when the ``with`` block
ends normally the file is flushed, fsynced and renamed over ``path`` (and the folder fsynced,
so the rename itself reaches the disk). When the block raises, the temporary file is removed
and ``path`` is untouched: the old file stays whole, or no file appears. Every writer in
genodiff that replaces a file (checkpoints, tokenizer records, sample files, configs, reports,
plots, fine-tuning results, decompressed downloads) goes through it, or through its helpers
``write_text`` and ``save_figure``. ``tests/test_atomic_writers.py`` reads the package's source
and fails on any other write.

Three writers stage several files and rename them into place themselves, each documented where
it is: an exported checkpoint folder (``genodiff.checkpoints.folders``: every file written
under its temporary name, then all renamed), a download (``genodiff.data.download``: the
resumable ``.part`` file, renamed when complete) and a whole folder built beside its
destination and swapped in by ``replace_folder`` (``genodiff data labelled-split``). A file
written piece by piece over a long run (``genodiff sample``'s samples) goes through
``StagedFile``: appended under a staging name, renamed into place when complete, resumable,
and held by one writer at a time (a lock file beside it).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from genodiff.errors import DiskFullError, InputFileExistsError, InputValueError
from genodiff.memory import size_text

try:
    import fcntl
except ImportError:  # Windows: no advisory locks here; one writer per file is the user's care
    fcntl = None

TEMPORARY_SUFFIX = ".tmp"
# What a write onto a full disk fails with, and how to say it.
DISK_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}
# ... and a write past the process's file-size limit (``ulimit -f``; Python ignores SIGXFSZ).
FILE_TOO_LARGE = {errno.EFBIG: "file size limit of this process (ulimit -f) reached"}


def temporary_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: a hidden file beside it,
    unique to this process."""
    return path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")


def check_writable(path: Path, parameter: str) -> None:
    """InputValueError (naming ``parameter``, the argument that gave ``path``) unless
    ``atomic_write`` can create ``path``: the temporary file it would write is created and
    removed again in ``path``'s folder, or, when that folder is still to be made, a folder in
    the nearest existing one above (so a read-only file system is found too, even by root).
    For a command to check its output before hours of work rather than after."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        reason = "a file, not a folder"
    else:
        probe = temporary_path(path if folder == path.parent else folder / path.name)
        try:
            if folder == path.parent:
                os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                probe.unlink()
            else:
                probe.mkdir()
                probe.rmdir()
            return
        except FileExistsError:  # left by a killed writer whose pid was this one
            return
        except OSError as err:
            reason = err.strerror or str(err)
    raise InputValueError(
        f"cannot write {path} ({folder}: {reason}); choose a folder you can write to",
        parameter=parameter,
    )


def remove_temporary_files(folder: Path, name: str | None = None) -> None:
    """Delete what killed writers left in ``folder`` (``temporary_path``): every temporary
    file, or with ``name`` only those of the file of that name (call it while no writer of
    them runs there)."""
    for leftover in folder.glob(f".*{TEMPORARY_SUFFIX}"):
        if name is None or re.fullmatch(rf"\.{re.escape(name)}\.\d+", leftover.stem):
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
    raised: torch's writer reports it as a RuntimeError over the OSError) or the file-size limit
    (EFBIG) is a ``DiskFullError`` naming ``path``, ``expected_bytes`` (about what the file
    needs) when given, and the space left (``disk_full_error``).
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
        temporary.unlink(missing_ok=True)  # before measuring what is free
        full = disk_full_error(err, path, expected_bytes, existed)
        if full is None:
            raise
        raise full from err
    finally:
        temporary.unlink(missing_ok=True)
    fsync_path(path.parent)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (``atomic_write``)."""
    with atomic_write(path) as handle:
        handle.write(text)


def save_figure(figure: Any, path: str | os.PathLike, dpi: int = 120) -> None:
    """Save a matplotlib ``figure`` to ``path`` as PNG atomically (``atomic_write``)."""
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=dpi)


# renameat2(2): AT_FDCWD (paths relative to the working folder) and RENAME_EXCHANGE (linux/fs.h).
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(first: Path, second: Path) -> bool:
    """Swap the names of ``first`` and ``second`` (both exist) in one atomic step: Linux's
    ``renameat2(RENAME_EXCHANGE)``. False, with nothing changed, where the system (not glibc
    2.28 or later on Linux 3.15 or later) or the filesystem cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):  # no such call (macOS, musl), no libc handle
        return False
    names = (os.fsencode(first), os.fsencode(second))
    if renameat2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # kernel or filesystem lacks it
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def replace_folder(staging: Path, dest: Path) -> None:
    """Put the finished folder ``staging`` (beside ``dest``, on the same filesystem) at
    ``dest`` and delete what ``dest`` held, in as few renames as the system allows; then fsync
    the parent folder, so that the renames reach the disk. What a kill leaves, moment by moment:

    - ``dest`` missing or an empty folder: one rename. Before it ``dest`` is as it was and
      ``staging`` is beside it (a hidden folder, to delete); after it ``dest`` is the new folder.
    - ``dest`` holding files, where ``exchange`` works (Linux): one atomic swap. Before it, as
      above; after it ``dest`` is the new folder and the old one is under the ``staging`` name
      until it is deleted (a kill during the deletion leaves part of it there, to delete).
    - elsewhere two renames, ``dest`` to ``.NAME.PID.old`` beside it and then ``staging`` to
      ``dest``. A kill between them leaves no ``dest`` but both folders whole: the old one under
      ``.old``, the new one under the ``staging`` name (rename either to ``dest``); after the
      second, ``dest`` is the new folder and the old one is deleted (a kill during the
      deletion leaves part of it under ``.old``). An error at the second rename moves the old
      folder back.
    """
    old = None
    if not dest.exists() or not any(dest.iterdir()):
        os.replace(staging, dest)  # POSIX rename replaces an empty folder
    elif exchange(staging, dest):
        old = staging
    else:
        old = dest.with_name(f".{dest.name}.{os.getpid()}.old")
        os.replace(dest, old)
        try:
            os.replace(staging, dest)
        except BaseException:
            os.replace(old, dest)
            raise
    fsync_path(dest.parent)
    if old is not None:
        shutil.rmtree(old)


def disk_full_error(
    err: BaseException,
    path: Path,
    expected: int | None = None,
    existed: bool = False,
    kept: str | None = None,
) -> DiskFullError | None:
    """The ``DiskFullError`` to raise instead of ``err``, a failed write of ``path`` (which
    ``existed`` before, needing about ``expected`` bytes when known), when ``err`` or an
    exception it was raised from or while handling is an OSError of a full disk (ENOSPC,
    EDQUOT) or of the file-size limit (EFBIG); else None. ``kept`` says what the failed write
    left (default: the previous ``path`` as it was, or none, by ``existed``). Call it once the
    partial file is removed: the message says how much space is free."""
    disk_errno = _disk_full_errno(err)
    if disk_errno is None:
        return None
    previous = f"the previous {path.name} is kept as it was"
    kept = kept or (previous if existed else f"no {path.name} written")
    if disk_errno in FILE_TOO_LARGE:
        return DiskFullError(
            disk_errno,
            f"{FILE_TOO_LARGE[disk_errno]} writing {path}; {kept}. Raise the limit "
            "(ulimit -f unlimited), or write a smaller file",
        )
    needed = f"about {size_text(expected)} needed, " if expected is not None else ""
    free = size_text(shutil.disk_usage(path.parent).free)
    return DiskFullError(
        disk_errno,
        f"{DISK_FULL[disk_errno]} writing {path} ({needed}{free} free there); {kept}. Free some "
        "space, or write to another disk",
    )


def _disk_full_errno(err: BaseException) -> int | None:
    """ENOSPC, EDQUOT or EFBIG when ``err`` or an exception it was raised from or while
    handling is an OSError with that errno; else None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and (err.errno in DISK_FULL or err.errno in FILE_TOO_LARGE):
            return err.errno
        err = err.__cause__ or err.__context__
    return None


def staged_paths(path: Path) -> tuple[Path, Path]:
    """Where ``StagedFile`` stages ``path``: (the staged file, its record)."""
    staged = path.with_name(f".{path.name}.partial")
    return staged, staged.with_name(staged.name + ".json")


def items_written(path: Path) -> int | None:
    """The items a ``StagedFile`` writing ``path`` (in another process, at any moment) has
    written so far, as its record says: None when there is no record beside a staged file
    (none staged, or none of its pieces is complete yet)."""
    staged, record = staged_paths(path)
    try:
        items = int(json.loads(record.read_text())["items"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return items if staged.exists() else None  # a record alone is a removed file's


class StagedFile:
    """A file written piece by piece, complete or not at all: the pieces are appended to
    ``.NAME.partial`` beside ``path`` (each flushed and fsynced), and after each one a small
    record ``.NAME.partial.json`` (written atomically) says how many items are written, how many
    bytes they take and ``stamp`` (what the job is: the same command writes the same stamp).
    ``commit`` renames the staged file over ``path``. A writer killed at any moment leaves the
    staged file and a record of its last complete piece; ``resume=True`` truncates the file to
    that piece and goes on after it (``done`` items are written already), when the stamp is the
    same. Without ``resume`` a staged file already there is refused (it is a killed run's work),
    and so is an existing ``path`` unless ``overwrite``; a full disk is a ``DiskFullError``
    that keeps the staged work. Nothing is lost. One writer at a time: a second writer of the
    same ``path`` (another process, or a second ``StagedFile`` in this one) is refused while
    the first holds ``.NAME.partial.lock`` (an advisory lock that ends with its process, so a
    killed run leaves none held). ``companions``: the files the job's other processes write
    their shares into beside it (staged or finished), which a resume needs as much as this one:
    any of them is a killed run's work too, and the refusals name those that exist with it."""

    def __init__(
        self,
        path: str | os.PathLike,
        stamp: dict[str, Any],
        resume: bool,
        overwrite: bool,
        companions: Sequence[Path] = (),
    ) -> None:
        self.path = Path(path)
        self.staged, self.record = staged_paths(self.path)
        self.stamp = stamp
        self.companions = [companion for companion in companions if companion.exists()]
        self.done, self.size = 0, 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = _held_lock(self.staged.with_name(self.staged.name + ".lock"), self.path)
        try:
            self._check(resume, overwrite)
        except BaseException:
            self.release()
            raise

    def _check(self, resume: bool, overwrite: bool) -> None:
        """Refuse a killed run's work (unless ``resume``) and an existing file (unless
        ``overwrite``); with ``resume`` go on after the last complete piece."""
        if not self.staged.exists():  # a record left without its file counts nothing now
            self.record.unlink(missing_ok=True)
        work = [p for p in (self.staged, *self.companions) if p.exists()]
        if work and not resume:
            named = ", ".join([str(work[0]), *(p.name for p in work[1:])])
            holds, files = ("hold", "these files") if len(work) > 1 else ("holds", "that file")
            raise InputFileExistsError(
                f"{named} {holds} the work of a run that did not finish: resume it, or remove "
                f"{files} to start again",
                parameter="resume",
            )
        if self.path.exists() and not overwrite and not resume:
            raise InputFileExistsError(
                f"{self.path} exists: choose another file, or overwrite it",
                parameter=("out", "overwrite"),
            )
        if resume and self.staged.exists():
            self._reopen()

    def _reopen(self) -> None:
        """Go on after the last complete piece the record names."""
        try:
            saved = json.loads(self.record.read_text())
            done, size, stamp = int(saved["items"]), int(saved["bytes"]), saved["stamp"]
        except (OSError, ValueError, KeyError, TypeError):
            done, size, stamp = 0, 0, self.stamp  # killed before its first piece was recorded
        if stamp != self.stamp:
            changed = "; ".join(setting_changes(stamp, self.stamp))
            shares, them = "", "it"
            if self.companions:  # needed by that resume too
                names = ", ".join(p.name for p in self.companions)
                shares = f" (its other processes' shares are staged beside it: {names})"
                them = "them all"
            raise InputValueError(
                f"{self.staged} was written by another job ({changed}): resume it with the same "
                f"settings{shares}, or remove {them} to start again",
                parameter="resume",
            )
        if size > self.staged.stat().st_size:
            raise InputValueError(
                f"{self.staged} is shorter than its record says: remove it", parameter="resume"
            )
        with open(self.staged, "r+b") as handle:
            handle.truncate(size)  # a piece being written when the run was killed
        self.done, self.size = done, size

    def append(self, text: str, items: int) -> None:
        """Add ``text`` (``items`` complete items) and record it."""
        data = text.encode("utf-8")
        recorded = self.done  # the complete items the record names before this piece
        try:
            with open(self.staged, "ab") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            self.done, self.size = self.done + items, self.size + len(data)
            record = {"stamp": self.stamp, "items": self.done, "bytes": self.size}
            write_text(self.record, json.dumps(record))
        except Exception as err:
            if _disk_full_errno(err) is None:
                raise
            if recorded == 0:  # no complete piece: nothing worth keeping
                self.staged.unlink(missing_ok=True)
                self.record.unlink(missing_ok=True)
                kept = "no piece was complete: nothing is kept"
            else:  # a resume truncates the staged file to the pieces its record names
                kept = f"the {recorded} written so far are kept in {self.staged.name}: resume "
                kept += "once there is room"
            record_failed = self.done > recorded  # the piece is written, its record is not
            failed, needed = (self.record, None) if record_failed else (self.staged, len(data))
            raise disk_full_error(err, failed, needed, kept=kept) from err

    def commit(self) -> Path:
        """The staged file renamed over ``path`` (an empty one for no item); returns ``path``."""
        self.staged.touch()
        os.replace(self.staged, self.path)
        self.record.unlink(missing_ok=True)
        fsync_path(self.path.parent)
        self.release()
        return self.path

    def release(self) -> None:
        """Give up the writer's lock (``commit`` does); the lock file goes with it."""
        _release(self.lock)
        self.lock = None


def setting_changes(
    saved: Any, now: Any, prefix: str = "", labels: tuple[str, str] = ("then", "now")
) -> list[str]:
    """``KEY: SAVED then, NOW now`` for each setting that differs between two stamps, looking
    into mappings and into ``key=value`` descriptions (a sampling run's) to name the setting;
    ``labels``: the words after each value (two configs compared: ``("given", "pretrained")``)."""
    saved, now = _as_settings(saved), _as_settings(now)
    out: list[str] = []
    for key in sorted(set(saved) | set(now), key=str):
        before, after = saved.get(key), now.get(key)
        if before == after:
            continue
        if _as_settings(before) and _as_settings(after):
            inner = setting_changes(before, after, f"{prefix}{key}.", labels)
            out += inner or [f"{prefix}{key}"]
        else:
            out.append(f"{prefix}{key}: {before!r} {labels[0]}, {after!r} {labels[1]}")
    return out


def _as_settings(value: Any) -> dict[str, Any]:
    """A stamp's value as settings: a mapping as it is, ``"k=v k=v"`` split; else empty."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and "=" in value:
        return dict(token.split("=", 1) for token in value.split() if "=" in token)
    return {}


@contextmanager
def writer_lock(lock_path: Path, path: Path, parameter: str) -> Iterator[None]:
    """For the ``with`` block, ``path`` (a file or a folder) written by this writer alone: it
    holds ``lock_path`` (an advisory lock that ends with its process, so a killed writer holds
    none), removed at the end. InputFileExistsError, naming ``parameter`` (the argument that
    gave ``path``), while another writer holds it."""
    handle = _held_lock(lock_path, path, parameter)
    try:
        yield
    finally:
        _release(handle)


def _held_lock(lock_path: Path, path: Path, parameter: str = "out") -> IO[bytes] | None:
    """``lock_path`` opened and exclusively locked (None where the platform has no locks);
    InputFileExistsError when another writer holds it."""
    if fcntl is None:
        return None
    while True:
        handle = open(lock_path, "ab")  # noqa: SIM115 (held until release or the process ends)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise InputFileExistsError(
                f"{path} is being written by another run right now (it holds {lock_path}): "
                f"wait for it to finish, or choose another {'folder' if path.is_dir() else 'file'}",
                parameter=parameter,
            ) from None
        if _same_file(handle, lock_path):
            return handle
        # The writer that held it released it (and removed the lock file) between this open
        # and this lock: the lock is on a file no one else can open; take the one there now.
        handle.close()


def _same_file(handle: IO[bytes], path: Path) -> bool:
    """Whether ``path`` still names the file ``handle`` has open."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def _release(lock: IO[bytes] | None) -> None:
    """Give up a lock ``_held_lock`` took (None: none was taken); its file goes with it."""
    if lock is not None:
        Path(lock.name).unlink(missing_ok=True)
        lock.close()
