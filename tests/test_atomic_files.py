"""``atomic_write``: a reader sees the old file or the new one, never a part of either;
``StagedFile``: one writer at a time."""

from __future__ import annotations

import builtins
import errno
import os
import re
import subprocess
import sys

import pytest

from genodiff import atomic_files
from genodiff.atomic_files import StagedFile, atomic_write, remove_temporary_files
from genodiff.errors import DiskFullError, InputFileExistsError


def test_writes_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "out.txt"
    with atomic_write(path) as handle:
        handle.write("ACGT\n")
    assert path.read_text() == "ACGT\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]


def test_failure_keeps_the_old_file_whole(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(path, "wb") as handle:
        handle.write(b"new, half written")
        raise RuntimeError("disk full")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_failure_creates_no_file(tmp_path):
    path = tmp_path / "never.txt"
    with pytest.raises(KeyboardInterrupt), atomic_write(path) as handle:
        handle.write("x")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_only_whole_file_modes(tmp_path):
    with pytest.raises(ValueError, match="mode"), atomic_write(tmp_path / "a", "a"):
        pass


def test_leftovers_of_a_killed_writer_are_removed(tmp_path):
    (tmp_path / ".last.ckpt.123.tmp").write_bytes(b"partial")
    (tmp_path / "last.ckpt").write_bytes(b"whole")
    remove_temporary_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_a_second_writer_of_a_staged_file_is_refused_while_the_first_writes(tmp_path):
    """Two runs with the same output would both append to one staged file (each then reports
    success over a file of 2 or 4 pieces): the second is refused, in one line, until the first
    has committed; a killed writer's lock ends with its process."""
    path = tmp_path / "out.fa"
    first = StagedFile(path, {"job": 1}, resume=False, overwrite=False)
    first.append(">a\nAC\n", 1)
    with pytest.raises(InputFileExistsError, match="being written by another run right now"):
        StagedFile(path, {"job": 1}, resume=True, overwrite=False)
    assert first.commit().read_text() == ">a\nAC\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fa"]  # no lock file left
    second = StagedFile(path, {"job": 2}, resume=False, overwrite=True)
    second.append(">b\nGT\n", 1)
    assert second.commit().read_text() == ">b\nGT\n"


def test_the_lock_of_a_killed_writer_is_not_held(tmp_path):
    path = tmp_path / "out.fa"
    code = (
        "import os, sys\n"
        "from genodiff.atomic_files import StagedFile\n"
        f"s = StagedFile({str(path)!r}, {{'job': 1}}, resume=False, overwrite=False)\n"
        "s.append('>a\\nAC\\n', 1)\n"
        "os._exit(9)\n"  # dies holding the lock, as a killed run does
    )
    done = subprocess.run([sys.executable, "-c", code], check=False)
    assert done.returncode == 9
    resumed = StagedFile(path, {"job": 1}, resume=True, overwrite=False)
    assert resumed.done == 1
    resumed.append(">b\nGT\n", 1)
    assert resumed.commit().read_text() == ">a\nAC\n>b\nGT\n"


def test_a_lock_released_between_its_open_and_its_lock_is_taken_again(tmp_path, monkeypatch):
    """The first writer releases (closes and removes the lock file) after the second opened
    the lock file and before it locked it: the second's lock is then on a file no third writer
    can open, so it must take the lock file that is there now, or a third writer is let in."""
    import fcntl

    from genodiff import atomic_files

    path = tmp_path / "out.fa"
    lock_path = tmp_path / ".out.fa.partial.lock"
    real_flock, released = fcntl.flock, []

    def flock_after_a_release(fd, operation):
        if not released:  # the first writer's release, just before this lock
            released.append(lock_path.unlink())
        return real_flock(fd, operation)

    monkeypatch.setattr(atomic_files.fcntl, "flock", flock_after_a_release)
    second = StagedFile(path, {"job": 1}, resume=False, overwrite=False)
    monkeypatch.setattr(atomic_files.fcntl, "flock", real_flock)
    assert released and lock_path.exists()
    with pytest.raises(InputFileExistsError, match="being written by another run right now"):
        StagedFile(path, {"job": 1}, resume=True, overwrite=False)  # the third writer
    second.release()


def full_disk_for(monkeypatch, failing) -> None:
    """Writes through ``genodiff.atomic_files``'s ``open`` to a file whose name ``failing``
    takes fail as on a full disk (ENOSPC); other files are written as usual."""

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    def opening(path, *args, **kwargs):
        handle = builtins.open(path, *args, **kwargs)  # noqa: SIM115 (the caller's with closes it)
        return FullDisk(handle) if failing(os.path.basename(path)) else handle

    monkeypatch.setattr(atomic_files, "open", opening, raising=False)


def test_a_full_disk_at_the_first_piece_says_nothing_is_kept(tmp_path, monkeypatch):
    """There is no previous staged file to keep (was: "the previous .out.fa.partial is kept as
    it was"), and none is left."""
    path = tmp_path / "out.fa"
    staged = StagedFile(path, {"job": 1}, resume=False, overwrite=False)
    full_disk_for(monkeypatch, lambda name: name == ".out.fa.partial")
    with pytest.raises(DiskFullError) as raised:
        staged.append(">a\nAC\n", 1)
    message = str(raised.value)
    assert message.startswith(f"no space left on device writing {tmp_path / '.out.fa.partial'}")
    assert "nothing is kept" in message and "previous" not in message
    staged.release()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("failing", [".out.fa.partial", ".out.fa.partial.json"])
def test_a_full_disk_at_a_later_piece_keeps_the_written_ones_to_resume(
    tmp_path, monkeypatch, failing
):
    """The pieces written before stay staged, and the message says so; a resume goes on after
    them, whether the piece or its record did not fit."""
    path = tmp_path / "out.fa"
    staged = StagedFile(path, {"job": 1}, resume=False, overwrite=False)
    staged.append(">a\nAC\n", 1)
    staged.append(">b\nGT\n", 1)
    temporary = rf"\.{re.escape(failing)}\.\d+\.tmp"  # the record's: written atomically
    full_disk_for(monkeypatch, lambda name: name == failing or re.fullmatch(temporary, name))
    with pytest.raises(DiskFullError) as raised:
        staged.append(">c\nTT\n", 1)
    staged.release()
    monkeypatch.undo()
    assert f"writing {tmp_path / failing}" in str(raised.value)
    assert "the 2 written so far are kept in .out.fa.partial: resume" in str(raised.value)
    resumed = StagedFile(path, {"job": 1}, resume=True, overwrite=False)
    assert resumed.done == 2
    resumed.append(">c\nTT\n", 1)
    resumed.commit()
    assert path.read_text() == ">a\nAC\n>b\nGT\n>c\nTT\n"


def test_a_new_writer_is_not_counted_by_the_record_of_a_removed_staged_file(tmp_path, monkeypatch):
    """A staged file removed by hand (as a refusal asks, to start again) leaves its record:
    a new writer of the file is counted from its own pieces, also between its first piece and
    that piece's record (was: the old record's count, what a multi-process run's progress line
    reads of another process's share)."""
    path = tmp_path / "out.fa"
    first = StagedFile(path, {"job": 1}, resume=False, overwrite=False)
    for piece in (">a\nAC\n", ">b\nGT\n", ">c\nTT\n"):
        first.append(piece, 1)
    first.release()
    assert atomic_files.items_written(path) == 3
    (tmp_path / ".out.fa.partial").unlink()
    assert atomic_files.items_written(path) is None
    counted = []
    real_write_text = atomic_files.write_text

    def counting(target, text):  # the piece is in the staged file, its record is next
        counted.append(atomic_files.items_written(path))
        real_write_text(target, text)

    monkeypatch.setattr(atomic_files, "write_text", counting)
    second = StagedFile(path, {"job": 2}, resume=False, overwrite=False)
    second.append(">x\nAA\n", 1)
    assert counted == [None] and atomic_files.items_written(path) == 1
    second.commit()
