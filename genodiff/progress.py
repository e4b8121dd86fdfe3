"""Progress of a long command on stderr: one line rewritten in place on a terminal, one plain
line every ``LINE_INTERVAL`` seconds elsewhere (a log file, a notebook cell, ``nohup``).

Every command that can run longer than a few seconds (sample, eval, gen-ppl, evaluate-samples,
export; train, finetune and classifier through ``genodiff.training.progress_lines``) reports
through ``Progress``. It is on by default, off with the command's ``--no-progress``, and
``GENODIFF_PROGRESS=0`` / ``=1`` force it off / on (``progress_wanted``).
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Protocol, TextIO

from genodiff.errors import UserInputWarning
from genodiff.user_warnings import in_package

PROGRESS_ENV = "GENODIFF_PROGRESS"
TERMINAL_INTERVAL = 0.5  # seconds between redrawings of the line on a terminal
LINE_INTERVAL = 30.0  # seconds between plain lines elsewhere


def progress_wanted(no_progress: bool = False) -> bool:
    """Whether to show progress: never with ``--no-progress``; else as ``GENODIFF_PROGRESS``
    says (``0`` off, ``1`` on); else on (plain lines where stderr is no terminal)."""
    if no_progress:
        return False
    return os.environ.get(PROGRESS_ENV) != "0"


def counted(count: int, noun: str) -> str:
    """``1 sample``, ``4 samples``: a count and its noun, for the lines a command prints."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def is_main_process() -> bool:
    """True in the process that writes and prints for a run: global rank 0 as the launchers name it
    (torchrun: RANK; SLURM: SLURM_PROCID; Lightning's own DDP launcher: NODE_RANK and
    LOCAL_RANK). The other processes of a multi-process run check, write and print nothing
    (a training run's ``output_dir`` is the main process's)."""
    for key in ("RANK", "SLURM_PROCID"):
        if key in os.environ:
            return int(os.environ[key]) == 0
    return int(os.environ.get("NODE_RANK", 0)) == 0 and int(os.environ.get("LOCAL_RANK", 0)) == 0


# ``warnings.showwarning``'s signature: (message, category, filename, lineno, file, line)
ShowWarning = Callable[..., None]


def is_genodiffs_own(message: Warning | str, filename: str) -> bool:
    """Whether a warning (``warnings.showwarning``'s ``message`` and ``filename``) is
    genodiff's own: one genodiff gives its user (a ``UserInputWarning``, which
    ``user_warnings.warn_user`` attributes to the user's line), or raised in the package's code."""
    return isinstance(message, UserInputWarning) or in_package(filename)


def shown_by_the_main_process_alone(show: ShowWarning) -> ShowWarning:
    """``show`` (a ``warnings.showwarning``) for every warning but genodiff's own
    (``is_genodiffs_own``) in a process other than the main one (``is_main_process``): the
    other processes of a multi-process run (``devices``, ``--devices N``) meet the same
    warnings, which the main process shows once."""

    def shown(message, category, filename, lineno, file=None, line=None) -> None:
        if is_main_process() or not is_genodiffs_own(message, filename):
            show(message, category, filename, lineno, file, line)

    return shown


def warn_in_the_main_process_alone() -> None:
    """In a process other than the main one (one that a multi-process run started, which
    runs the same script or command again), genodiff's own warnings are left to the main
    process from now on (``shown_by_the_main_process_alone``); run as genodiff is imported.
    The command line prints them its own way, by the same rule (``cli.warnings_as_lines``)."""
    if not is_main_process():
        warnings.showwarning = shown_by_the_main_process_alone(warnings.showwarning)


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (a stream without ``isatty`` is not)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class ProgressLine(Protocol):
    """What a loop reports ``done`` of ``total`` units of ``what`` to: a ``Progress``, or a
    view of one that shows another count (``genodiff sample --devices``: the whole run's
    samples as the main process's sampler steps go)."""

    def update(self, done: float, total: float | None, what: str) -> None: ...


class Progress:
    """``LABEL: WHAT DONE/TOTAL (P%), R WHAT/s, elapsed M:SS, ETA M:SS[, EXTRA]`` on ``stream``
    (default: stderr).

    Drawn at the first and the last update and at most once every ``interval`` seconds in
    between (default: ``TERMINAL_INTERVAL`` on a terminal, where the line is rewritten in
    place; ``LINE_INTERVAL`` elsewhere, where each drawing is its own line). The rate and the
    ETA count from the first update on: the time before it (loading, compiling kernels, the
    first batch) says nothing about the pace of the rest, so the first line has neither,
    unless it is also the last (its rate then counts from the start). ``start``: the units
    done before this process began (a resumed run), left out of that rate. A ``total`` of
    None or infinity draws ``WHAT DONE`` and the rate. A disabled ``Progress`` writes nothing.
    """

    def __init__(
        self,
        label: str,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float | None = None,
        start: float = 0,
    ) -> None:
        self.label = label
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.terminal = is_terminal(self.stream)
        if interval is None:
            interval = TERMINAL_INTERVAL if self.terminal else LINE_INTERVAL
        self.interval = interval
        self.start_count = start
        self.start = time.monotonic()
        self.first_update: tuple[float, float] | None = None  # (units done, time)
        self.last_drawn: float | None = None
        self.open_line = False  # a line rewritten in place still lacks its newline

    def update(
        self,
        done: float,
        total: float | None,
        what: str,
        extra: str = "",
        force: bool = False,
    ) -> None:
        """``done`` of ``total`` units of ``what`` (e.g. "windows") are finished; ``extra``
        (e.g. "train/nelbo 2.31") ends the line; ``force`` draws it whatever the interval."""
        if not self.enabled:
            return
        now = time.monotonic()
        known = total is not None and math.isfinite(total)
        finished = known and done >= total
        rate = self._rate(done, now, finished)
        if self.first_update is None:
            self.first_update = (done, now)
        drawn_lately = self.last_drawn is not None and now - self.last_drawn < self.interval
        if drawn_lately and not (finished or force):
            return
        self.last_drawn = now
        line = f"{self.label}: {what} {done:g}"
        if known:
            fraction = done / total if total > 0 else 1.0
            line += f"/{total:g} ({fraction:.0%})"
        if rate is not None:
            line += f", {rate:.3g} {what}/s"
        line += f", {_clock(now - self.start)}"
        if known and not finished and rate:
            line += f", ETA {_clock((total - done) / rate)}"
        if extra:
            line += f", {extra}"
        self._draw(line, finished)

    def _rate(self, done: float, now: float, finished: bool) -> float | None:
        """Units per second since the first update; None at the first update unless it is
        the last (then since the start, less ``start``)."""
        if self.first_update is None:
            if not finished:
                return None
            first_done, first_time = self.start_count, self.start
        else:
            first_done, first_time = self.first_update
        seconds = now - first_time
        return (done - first_done) / seconds if seconds > 0 else 0.0

    def note(self, text: str) -> None:
        """One line about a stage that has no count (``LABEL: TEXT``)."""
        if self.enabled:
            self._draw(f"{self.label}: {text}", True)

    def close(self) -> None:
        """End a line left open on a terminal."""
        if self.open_line:
            self.stream.write("\n")
            self.stream.flush()
            self.open_line = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self, line: str, final: bool) -> None:
        if self.terminal:
            self.stream.write(f"\r\x1b[K{line}" + ("\n" if final else ""))
            self.open_line = not final
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    """``M:SS``, or ``H:MM:SS`` from an hour on."""
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
