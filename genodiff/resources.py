"""Files genodiff ships beside its code: the experiment configs, the demo genome, the demo
Genomic Benchmarks task and the models that load by name (``models/``).

In a source checkout (or an editable install) they are the repository's own ``configs/``,
``data/`` and ``tests/data/`` folders. A built wheel carries a copy of the same tree under
``genodiff/_bundle/`` (setup.py maps those folders into the package at build time, so git
holds one copy). Configs name their files relative to this root (``data/...``), so the same
YAML works from both.

What genodiff writes for itself (FASTA indices, compiled kernels) never goes into an installed
package: files there outlive ``pip uninstall``, which then leaves a ``genodiff/`` folder that
hides a later install as an empty namespace package, and a shared or read-only install is no
place for one user's files. ``is_shipped`` says which files are the package's;
``user_cache_folder`` is where such files go instead.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# Present only in an installed wheel; in a checkout the repository root plays its part.
BUNDLE = _PACKAGE / "_bundle"


def installed_from_wheel() -> bool:
    """Whether this genodiff is an installed wheel (``pip install .``), not a checkout (or an
    editable install of one)."""
    return BUNDLE.is_dir()


def resource_root() -> Path:
    """The folder holding ``configs/``, ``data/`` and ``tests/data/`` for this install."""
    return BUNDLE if installed_from_wheel() else _PACKAGE.parent


def is_shipped(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies inside the installed genodiff package: its code, or the bundle of
    files a wheel ships (``genodiff/_bundle``). A checkout's ``data/`` is the user's own tree,
    not the package's."""
    path = Path(path).resolve()
    return any(path.is_relative_to(folder.resolve()) for folder in (_PACKAGE, BUNDLE))


def user_cache_folder(kind: str) -> Path:
    """``$XDG_CACHE_HOME/genodiff/<kind>`` (``~/.cache/genodiff/<kind>``): the folder of what
    genodiff caches for this user (``fai``: FASTA indices; ``numba``: compiled CPU kernels)."""
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "genodiff" / kind


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
