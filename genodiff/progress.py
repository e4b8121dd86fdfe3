"""Progress of a long command on stderr: one line, rewritten in place on a terminal.

Every command that can run longer than a few seconds (sample, eval, gen-ppl, evaluate-samples,
export; train and finetune through Lightning's bar) reports through ``Progress``. It is on
when stderr is a terminal, off with the command's ``--no-progress``, and
``GENODIFF_PROGRESS=1`` / ``=0`` force it on / off (``progress_wanted``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

PROGRESS_ENV = "GENODIFF_PROGRESS"


def progress_wanted(no_progress: bool = False, stream: TextIO | None = None) -> bool:
    """Whether to show progress: never with ``--no-progress``; else as ``GENODIFF_PROGRESS``
    says (``1`` on, ``0`` off); else when ``stream`` (default: stderr) is a terminal."""
    if no_progress:
        return False
    forced = os.environ.get(PROGRESS_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    return stream.isatty()


class Progress:
    """``LABEL: WHAT DONE/TOTAL (P%), elapsed M:SS, ETA M:SS`` on ``stream`` (default: stderr).

    Drawn at the first and the last update and at most once every ``interval`` seconds in
    between; on a terminal the line is rewritten in place, elsewhere (``GENODIFF_PROGRESS=1``
    into a file) each drawing is its own line. A disabled ``Progress`` writes nothing.
    """

    def __init__(
        self,
        label: str,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 0.5,
    ) -> None:
        self.label = label
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self.start = time.monotonic()
        self.last_drawn: float | None = None
        self.open_line = False  # a line rewritten in place still lacks its newline

    def update(self, done: float, total: float, what: str) -> None:
        """``done`` of ``total`` units of ``what`` (e.g. "windows") are finished."""
        if not self.enabled:
            return
        now = time.monotonic()
        finished = done >= total
        if not finished and self.last_drawn is not None and now - self.last_drawn < self.interval:
            return
        self.last_drawn = now
        elapsed = now - self.start
        fraction = done / total if total > 0 else 1.0
        line = f"{self.label}: {what} {done:g}/{total:g} ({fraction:.0%}), {_clock(elapsed)}"
        if 0 < fraction < 1:
            line += f", ETA {_clock(elapsed * (1 - fraction) / fraction)}"
        self._draw(line, finished)

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
        if self.stream.isatty():
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
