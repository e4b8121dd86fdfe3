"""Errors in what the user gave genodiff: a config value, an option, a file, a checkpoint, a
missing package. The CLI prints their message as one line (``genodiff.cli.main``); any other
exception is a bug and keeps its traceback.

Each class also derives from the built-in error it refines, so ``except ValueError`` still
catches an ``InputValueError``.
"""

from __future__ import annotations


class UserInputError(Exception):
    """Something the user can fix, which the message names (and how)."""


class InputValueError(UserInputError, ValueError):
    """A bad value: a config key, a command-line option, the contents of an input file."""


class InputKeyError(UserInputError, KeyError):
    """An unknown name: a registered class, a sequence of a FASTA file."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


class InputFileNotFoundError(UserInputError, FileNotFoundError):
    """An input file or folder that does not exist."""


class InputImportError(UserInputError, ImportError):
    """A package or plugin that the input needs is missing or broken."""


class TrainingDivergedError(UserInputError, FloatingPointError):
    """A loss or metric that became NaN or infinite; the message names the settings to change."""


class NonFiniteOutputError(UserInputError, FloatingPointError):
    """A network output (probabilities to draw from, a held-out NELBO) that is NaN or
    infinite: the weights it ran with cannot be trusted, so nothing is drawn or scored."""
