"""Every test here needs the plugin installed: CI's second pass selects them with the core's
tests that depend on the plugins installed (``-m installed_plugins``, tests/conftest.py)."""

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.installed_plugins)
