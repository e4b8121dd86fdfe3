"""A pytest plugin that finds the core tests whose outcome can depend on the plugins installed:
those during which the core looks up a plugin's entry point (``genodiff.registry``) or lists
the shipped experiment configs (plugins add theirs). With the text plugin installed::

    python -m pytest -q -n auto -p tests.trace_plugin_lookups tests

appends to ``plugin_lookups.txt`` (one line per test: its id, then what it looked up), from which
the root conftest.py's ``INSTALLED_PLUGINS_MODULES`` was drawn. Only lookups in the pytest
process are seen, not those of the subprocesses a test starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PLUGIN_PACKAGE = "genodiff_text"
OUTPUT = Path("plugin_lookups.txt")
_current: list[str] = []  # the running test's id, while one runs
_lookups: set[tuple[str, str]] = set()


def _note(what: str) -> None:
    if _current:
        _lookups.add((_current[0], what))


def pytest_configure(config: pytest.Config) -> None:
    from genodiff import registry, shipped_configs

    entry_points, experiment_files = registry._entry_points, shipped_configs.experiment_files

    def traced_entry_points(kind: str):
        found = entry_points(kind)
        if any(entry.value.startswith(PLUGIN_PACKAGE) for entry in found):
            _note(f"entry points: {kind}")
        return found

    def traced_experiment_files():
        _note("experiment configs")
        return experiment_files()

    registry._entry_points = traced_entry_points
    shipped_configs.experiment_files = traced_experiment_files


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _current[:] = [item.nodeid]
    yield
    _current.clear()


def pytest_unconfigure(config: pytest.Config) -> None:
    with OUTPUT.open("a") as out:  # appended to: each xdist worker adds its own tests' lines
        out.writelines(sorted(f"{test}\t{what}\n" for test, what in _lookups))
