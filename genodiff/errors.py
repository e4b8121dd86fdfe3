"""Errors in what the user gave genodiff: a config value, an option, a file, a checkpoint, a
missing package. The CLI prints their message as one line (``genodiff.cli.main``); any other
exception is a bug and keeps its traceback.

Each class also derives from the built-in error it refines, so ``except ValueError`` still
catches an ``InputValueError``.
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Iterable, Sequence
from pathlib import Path


class UserInputError(Exception):
    """Something the user can fix, which the message names (and how), in the library's terms.

    ``parameter``, when given, is the name of the argument or field at fault (``num_samples``,
    ``label``), or a tuple of the names that could fix it; a front end adds its own spelling
    (the CLI: the option ``--num-samples``, ``genodiff.cli.main``)."""

    def __init__(self, *args: object, parameter: str | tuple[str, ...] | None = None) -> None:
        super().__init__(*args)
        self.parameter = parameter


class UserInputWarning(UserWarning):
    """A warning genodiff gives its user about what they asked for or gave it (a length beyond
    the trained windows, a checkpoint's unknown keys), in the library's terms, raised by
    ``genodiff.user_warnings.warn_user`` at the user's line; ``parameter`` as
    ``UserInputError``'s: the arguments that would change it, which a front end names in its
    own spelling (the CLI: its options, ``genodiff.cli.warnings_as_lines``)."""

    def __init__(self, message: str, parameter: str | tuple[str, ...] | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class InputValueError(UserInputError, ValueError):
    """A bad value: a config key, a command-line option, the contents of an input file."""


class InputKeyError(UserInputError, KeyError):
    """An unknown name: a registered class, a sequence of a FASTA file."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


class InputFileNotFoundError(UserInputError, FileNotFoundError):
    """An input file or folder that does not exist."""


class InputFileExistsError(UserInputError, FileExistsError):
    """An output that exists already and is kept unless the user allows replacing it."""


class InputImportError(UserInputError, ImportError):
    """A package or plugin that the input needs is missing or broken."""


class TrainingDivergedError(UserInputError, FloatingPointError):
    """A loss or metric that became NaN or infinite; the message names the settings to change."""


class NonFiniteOutputError(UserInputError, FloatingPointError):
    """A network output (probabilities to draw from, a held-out NELBO) that is NaN or
    infinite: the weights it ran with cannot be trusted, so nothing is drawn or scored."""


class DiskFullError(UserInputError, OSError):
    """A write that found no space left on the device (or the user's disk quota spent, or the
    process's file-size limit reached); the message names the file, the space it needed when
    known, and what was kept."""

    def __str__(self) -> str:  # the message, not OSError's "[Errno 28] ..."
        return str(self.strerror)


def listing(names: Sequence[str], shown: int = 5) -> str:
    """``a, b, c, d, e and 12 more``: the first ``shown`` of ``names`` for a one-line error
    (every name with ``GENODIFF_DEBUG=1``)."""
    names = list(names)
    if len(names) <= shown or os.environ.get("GENODIFF_DEBUG"):
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more (GENODIFF_DEBUG=1 lists all)"


def did_you_mean(name: object, names: Sequence[str]) -> str:
    """`` (did you mean 'NAME'?)`` for the one of ``names`` that the mistyped ``name`` spells
    closest (the same letters in another case first); "" when none is close."""
    typed = str(name)
    meant = [n for n in names if n.lower() == typed.lower()]
    meant = meant or difflib.get_close_matches(typed, names, n=1)
    return f" (did you mean {meant[0]!r}?)" if meant else ""


def require_regular_file(
    path: str | os.PathLike, what: str, parameter: str | None = None, missing: str | None = None
) -> Path:
    """``path`` when it is a regular file (or a link to one); an input error saying it does
    not exist (``missing``, when given: the caller's words and hint for that), is a loop of
    links, a folder, or something else (a FIFO, a device), with ``what`` naming the file and
    ``parameter`` the argument that gave it."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        if path.is_symlink():  # one of a loop of links?
            try:
                os.stat(path)
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise InputValueError(
                        f"{what} {path} is a loop of symbolic links; point it at a file",
                        parameter=parameter,
                    ) from None
        if missing is not None:
            raise InputFileNotFoundError(missing, parameter=parameter)
        if path.is_symlink():
            raise InputFileNotFoundError(
                f"{what} {path} not found (a link to {os.readlink(path)}, which does not exist)",
                parameter=parameter,
            )
        raise InputFileNotFoundError(f"{what} {path} not found", parameter=parameter)
    if path.is_dir():
        raise InputValueError(f"{what} {path} is a folder; name a file", parameter=parameter)
    raise InputValueError(
        f"{what} {path} is not a regular file (a FIFO, socket or device); genodiff reads it "
        "more than once, so save it to a file first",
        parameter=parameter,
    )


def refuse_sequence_as_file_name(value: object, parameter: str) -> None:
    """For an argument that takes a file or the sequences themselves (``PathLike |
    Sequence[str]``): InputFileNotFoundError, naming ``parameter``, when ``value`` is a str
    that names no file and reads as one sequence (letters alone: no folder, no suffix), as a
    str is read as a file name; the error says to give sequences as a list."""
    if not isinstance(value, str) or not value.isalpha() or Path(value).exists():
        return
    shown = value if len(value) <= 20 else f"{value[:17]}..."
    raise InputFileNotFoundError(
        f"{parameter} is a str, which is read as a file name, and there is no file {shown}; "
        "to pass sequences, give a list of them (e.g. [sequence])",
        parameter=parameter,
    )


def sequence_list(sequences: object, parameter: str = "sequences") -> list[str]:
    """``sequences`` as a list of str; InputValueError naming ``parameter`` for one str (which
    would be read letter by letter), for something that is no iterable, or for an item that is
    no str."""
    if isinstance(sequences, str):
        raise InputValueError(
            f"{parameter} is one str: give a list of sequences (e.g. [sequence]); a str would "
            "be read letter by letter",
            parameter=parameter,
        )
    if not isinstance(sequences, Iterable):
        raise InputValueError(
            f"{parameter} must be a list of str, got {type(sequences).__name__}",
            parameter=parameter,
        )
    sequences = list(sequences)
    other = next((s for s in sequences if not isinstance(s, str)), None)
    if other is not None:
        raise InputValueError(
            f"{parameter} must be str, one of them is a {type(other).__name__}: {other!r:.40}",
            parameter=parameter,
        )
    return sequences


def require_flag(value: object, parameter: str) -> bool:
    """``value`` when it is a bool (NumPy's too); InputValueError naming ``parameter``
    otherwise: a str such as ``"no"`` is true, and read so it would replace files."""
    kind = type(value)
    if isinstance(value, bool) or (
        kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")
    ):
        return bool(value)
    raise InputValueError(
        f"{parameter} must be True or False, got {value!r:.60}", parameter=parameter
    )


def require_output_path(value: object, what: str) -> Path:
    """``value`` as the path ``what`` (an output file or folder) is written to, ``~`` expanded
    as ``genodiff.load`` expands it; InputValueError (parameter ``out``) for a value that is
    no path (None, a number), which ``os.fspath`` would refuse with a bare TypeError."""
    if not isinstance(value, str | os.PathLike):
        raise InputValueError(
            f"{what} must be a path (a str or a Path), got {value!r:.60}", parameter="out"
        )
    return Path(value).expanduser()
