"""Files genodiff ships beside its code: the experiment configs, the demo genome, the demo
Genomic Benchmarks task and the models that load by name (``models/``).

In a source checkout (or an editable install) they are the repository's own ``configs/``,
``data/`` and ``tests/data/`` folders. A built wheel carries a copy of the same tree under
``genodiff/_bundle/`` (setup.py maps those folders into the package at build time, so git
holds one copy). Configs name their files relative to this root (``data/...``), so the same
YAML works from both.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# Present only in an installed wheel; in a checkout the repository root plays its part.
BUNDLE = _PACKAGE / "_bundle"


def resource_root() -> Path:
    """The folder holding ``configs/``, ``data/`` and ``tests/data/`` for this install."""
    return BUNDLE if BUNDLE.is_dir() else _PACKAGE.parent


def resource(relative: str) -> Path:
    """``relative`` (e.g. ``data/chr22_20-21Mb.fa.gz``) under ``resource_root()``."""
    return resource_root() / relative


def given_or_shipped(path: str) -> str:
    """A file the user names on the command line: ``path`` as given, unless nothing is there
    and it names a file of genodiff's ``data/`` (``data/species/e_coli_536.fa.gz``, as the
    docs write it from a checkout's root): then that file, so that the docs' commands run from
    any folder and from a wheel, as the shipped configs' data paths do."""
    parts = Path(path).parts
    shipped = resource(path)
    if parts[:1] != ("data",) or ".." in parts or Path(path).exists() or not shipped.is_file():
        return path
    return str(shipped)


def bundled_copy(recorded: str) -> Path | None:
    """This install's copy of a file that a run recorded inside another install's bundle
    (``.../site-packages/genodiff/_bundle/data/chr22_20-21Mb.fa.gz`` of a virtual environment
    since made anew, or of another machine's); None for a path in no bundle, or a file this
    install does not ship. (What genodiff ships keeps its content: the shipped models record
    the sha256 of the files they were trained on, and tests/test_shipped_models.py reads them.)"""
    parts = Path(recorded).parts
    for at in range(len(parts) - 2, -1, -1):
        if parts[at : at + 2] == BUNDLE.parts[-2:]:
            copy = resource("/".join(parts[at + 2 :]))
            return copy if copy.is_file() else None
    return None
