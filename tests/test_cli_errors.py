"""The CLI prints one line only for errors in what the user gave (``genodiff.errors``) and for
the file system's refusals about the user's files and disk; any other error is a bug and keeps
its traceback."""

import errno

import pytest

from genodiff import cli
from genodiff.checkpoints import info
from genodiff.errors import InputKeyError, InputValueError


def fail_inside_info(monkeypatch, tmp_path, error: Exception) -> list[str]:
    """``genodiff info`` on a file whose reading raises ``error``; the command's argv."""
    checkpoint = tmp_path / "run.ckpt"
    checkpoint.write_bytes(b"")

    def open_checkpoint(path):
        raise error

    monkeypatch.setattr(info, "open_checkpoint", open_checkpoint)
    return ["info", str(checkpoint)]


@pytest.mark.parametrize(
    "error",
    [
        KeyError("state_dict"),
        ValueError("too many values to unpack"),
        ImportError("cannot import name 'x'"),
        OSError(errno.ECONNRESET, "Connection reset by peer"),
        FloatingPointError("overflow"),
    ],
    ids=["KeyError", "ValueError", "ImportError", "OSError", "FloatingPointError"],
)
def test_an_internal_error_keeps_its_traceback(monkeypatch, tmp_path, capsys, error):
    argv = fail_inside_info(monkeypatch, tmp_path, error)
    with pytest.raises(type(error)) as raised:
        cli.main(argv)
    assert raised.value is error
    assert "error:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "error, line",
    [
        (InputValueError("run.ckpt is truncated"), "run.ckpt is truncated"),
        (InputKeyError("unknown backbone 'x'"), "unknown backbone 'x'"),  # no KeyError quotes
        (FileNotFoundError(errno.ENOENT, "No such file", "a.fa"), "No such file: 'a.fa'"),
        (PermissionError(errno.EACCES, "Permission denied", "a.fa"), "Permission denied: 'a.fa'"),
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    ],
    ids=["input value", "input key", "missing file", "permission", "disk full"],
)
def test_a_user_error_is_one_line(monkeypatch, tmp_path, capsys, error, line):
    argv = fail_inside_info(monkeypatch, tmp_path, error)
    assert cli.main(argv) == 2
    (printed,) = capsys.readouterr().err.strip().splitlines()
    assert printed.startswith("genodiff info: error: ") and printed.endswith(line)


def test_genodiff_debug_shows_the_traceback_of_a_user_error(monkeypatch, tmp_path):
    error = InputValueError("run.ckpt is truncated")
    argv = fail_inside_info(monkeypatch, tmp_path, error)
    monkeypatch.setenv("GENODIFF_DEBUG", "1")
    with pytest.raises(InputValueError):
        cli.main(argv)
