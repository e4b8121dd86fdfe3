"""For every test suite of this repository (the core's ``tests/`` and the plugins'): no progress
lines in the tests' output, and the marker ``installed_plugins`` on the tests whose outcome
depends on the plugins installed."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress is on by default, in plain lines where stderr is no terminal (genodiff.progress):
    the tests read their commands' output without them (subprocesses inherit the setting); the
    tests of progress itself turn it back on."""
    monkeypatch.setenv("GENODIFF_PROGRESS", "0")


# The core reaches a plugin only through its entry points (genodiff.registry): these core test
# modules list what is installed or run code that does (which domains own a sample file's
# format, ``gen-ppl``'s scorers, the configs ``train --help`` shows), found by tracing every
# entry-point lookup of the core's suite run with the text plugin installed
# (tests/trace_plugin_lookups.py); the tests of the plugin mechanism itself (fake plugins
# beside the installed ones: test_domain_neutral_core.py, test_plugins_and_failures.py,
# test_shipped_models.py); and test_import_cost.py, whose fresh interpreters the trace does
# not see and whose point is what a command imports. CI's second pass runs them, and every
# plugin's own tests, with the text plugin installed: ``-m installed_plugins``.
INSTALLED_PLUGINS_MODULES = {
    "test_bad_input_cli.py",
    "test_cli.py",
    "test_doc_examples.py",
    "test_domain_neutral_core.py",
    "test_generative_perplexity.py",
    "test_hostile_input_remainder.py",
    "test_import_cost.py",
    "test_metrics_alphabet.py",
    "test_metrics_cli.py",
    "test_oracle.py",
    "test_plugins_and_failures.py",
    "test_shipped_models.py",
    "test_weights_provenance.py",
}
ROOT = Path(__file__).parent
CORE_TESTS, PLUGINS = ROOT / "tests", ROOT / "plugins"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        core = item.path.parent == CORE_TESTS and item.path.name in INSTALLED_PLUGINS_MODULES
        if core or PLUGINS in item.path.parents:
            item.add_marker(pytest.mark.installed_plugins)
