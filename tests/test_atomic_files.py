"""``atomic_write``: a reader sees the old file or the new one, never a part of either."""

from __future__ import annotations

import pytest

from genodiff.atomic_files import atomic_write, remove_temporary_files


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
