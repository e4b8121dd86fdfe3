"""For every test suite of this repository (the core's ``tests/`` and the plugins'): no progress
lines in the tests' output."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress is on by default, in plain lines where stderr is no terminal (genodiff.progress):
    the tests read their commands' output without them (subprocesses inherit the setting); the
    tests of progress itself turn it back on."""
    monkeypatch.setenv("GENODIFF_PROGRESS", "0")
