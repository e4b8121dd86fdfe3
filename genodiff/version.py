"""The package version (one place: pyproject.toml reads it, ``genodiff --version`` prints it)."""

__version__ = "0.1.0"
