"""``warn_user``: a warning for genodiff's user, attributed to the user's line.

Python names a warning's file and line (``script.py:12: UserInputWarning: ...``), and a
fixed ``stacklevel`` names one of genodiff's own frames whenever the warning is raised a few
calls deeper than the public function the user called. ``warn_user`` names the line that
called into genodiff instead, as NumPy and pandas do (Python 3.12's ``skip_file_prefixes``
does the same, and genodiff runs on 3.11): the caller of the outermost genodiff frame, so
that a warning raised in a hook that Lightning or torch calls back (a checkpoint's
``on_load_checkpoint`` during ``genodiff.train``) names the user's ``train`` line too, not
the library that called back.

The command line is genodiff's own code, with no line of the user's to name: there the
warning keeps the frame that raised it, which ``cli.warnings_as_lines`` prints as one line
(``genodiff COMMAND: warning: ...``), as it prints every warning raised in genodiff.
"""

from __future__ import annotations

import sys
import warnings
from functools import lru_cache
from pathlib import Path
from types import FrameType

from genodiff.errors import UserInputWarning

PACKAGE_FOLDER = Path(__file__).resolve().parent
# The command line's module: a warning raised under it keeps its own frame.
COMMAND_LINE_MODULE = "genodiff.cli"


@lru_cache(maxsize=1024)
def in_package(filename: str) -> bool:
    """Whether code of ``filename`` (a code object's ``co_filename``) is genodiff's; never a
    pseudo-file (``<string>``, ``<stdin>``: ``python -c``, the REPL), which would otherwise
    resolve against the working directory."""
    if filename.startswith("<"):
        return False
    return Path(filename).resolve().is_relative_to(PACKAGE_FOLDER)


def _is_import_machinery(frame: FrameType) -> bool:
    """A frame of ``importlib._bootstrap``, which Python's own warnings skip too."""
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def users_frame(raised: FrameType) -> FrameType:
    """The frame a warning raised at ``raised`` (a genodiff frame) names: the caller of the
    outermost genodiff frame (the import machinery skipped); ``raised`` itself when genodiff's
    command line is that outermost frame, or when no frame outside genodiff called it."""
    outermost = None
    frame: FrameType | None = raised
    while frame is not None:
        if in_package(frame.f_code.co_filename):
            outermost = frame
        frame = frame.f_back
    if outermost is None or outermost.f_globals.get("__name__") == COMMAND_LINE_MODULE:
        return raised
    caller = outermost.f_back
    while caller is not None and _is_import_machinery(caller):
        caller = caller.f_back
    return raised if caller is None else caller


def warn_user(message: str | UserInputWarning) -> None:
    """Warn of ``message`` (a str: a ``UserInputWarning`` of it) at the user's line that led
    to this call (``users_frame``), as ``warnings.warn`` with the right ``stacklevel`` would."""
    warning = message if isinstance(message, UserInputWarning) else UserInputWarning(message)
    frame = users_frame(sys._getframe(1))
    module_globals = frame.f_globals
    warnings.warn_explicit(
        warning,
        type(warning),
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get("__name__", "<string>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
        # no module_globals: its loader would be asked for the source of ``__main__``, which
        # under ``python -c``, ``python -m`` and the REPL raises ImportError; the line shown is
        # read by file name (linecache, which holds notebook cells too)
    )
