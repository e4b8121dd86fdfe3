"""A model's training data files: named portably when the model ships, found again elsewhere.

A run's config names its data files by their absolute paths on the machine that trained it
(``genodiff.config.resolve_data_paths``), which mean nothing on another machine. An export
with ``portable_data`` (``Model.save_pretrained``; bench/ship_model.py ships the models of
models/ so) writes ``portable_record``'s config: each file of its ``data:`` section
(``DataModule.data_file_keys``, a mapping such as ``fasta_by_label`` entry by entry) named by
its path under the repository's root when it lies there (``data/species/e_coli_536.fa.gz``:
found again from a checkout or a wheel, ``genodiff.resources``), else by its file name alone,
and the run's other paths by their last component; beside the config (genodiff.json's
``data_files``) one record per file: its key, name, repository path, the sha256 of its
content (``content_sha256``) and where to get it.

``locate_data`` turns a loaded model's ``data:`` section back into files on this machine: the
copies the caller points at, the repository's files, or the paths a run recorded; a copy or a
repository file must have the recorded sha256. A file that is nowhere is one
InputFileNotFoundError naming it, its sha256, where to get it and how to point at a copy.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from genodiff import registry
from genodiff.data.genome import compression, fasta_errors
from genodiff.errors import InputFileNotFoundError, InputValueError, listing
from genodiff.resources import bundled_copy, resource, resource_root

# genodiff.json's key of the records of the data files (``portable_data``'s list).
DATA_FILES_KEY = "data_files"
# The top-level keys of a run's config that may hold a path of the machine that trained it.
RUN_PATH_KEYS = ("output_dir", "init_from", "ckpt_path")
# Where a data file is: (key of the data section, entry of a mapping key or None).
Place = tuple[str, str | None]
# The argument of the front ends that takes copies of the data files (Model.windows' keywords,
# evaluate_checkpoint's mapping; the CLI's --data).
DATA_FILES_PARAMETER = "data_files"


def content_sha256(path: str | os.PathLike) -> str:
    """The sha256 (hex) of the content of the file ``path``: its bytes, decompressed when they
    are gzip or BGZF, so that a FASTA has one digest however it is compressed (``sha256sum``
    of the plain file, ``gunzip -c FILE | sha256sum`` of a compressed one). Remembered per
    path, size and modification time."""
    stat = os.stat(path)
    return _content_sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _content_sha256(path: str, size: int, mtime_ns: int) -> str:
    opener = gzip.open if compression(path) != "none" else open
    digest = hashlib.sha256()
    with fasta_errors(path), opener(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def data_file_places(data: Mapping[str, Any]) -> list[tuple[Place, str]]:
    """(place, path) of every file or folder the ``data:`` section ``data`` names, in the
    order of its module's ``data_file_keys``."""
    found: list[tuple[Place, str]] = []
    for key in registry.get("data", data["name"]).data_file_keys:
        value = data.get(key)
        if isinstance(value, Mapping):
            found += [((key, str(entry)), str(path)) for entry, path in value.items()]
        elif value:
            found.append(((key, None), str(value)))
    return found


def dotted(place: Place) -> str:
    """``data.fasta``, ``data.fasta_by_label.human``: the config key of a place."""
    key, entry = place
    return f"data.{key}" + ("" if entry is None else f".{entry}")


def _with(data: dict[str, Any], place: Place, value: str | None) -> None:
    """Set ``place`` of the (copied) section ``data`` to ``value``, in place."""
    key, entry = place
    if entry is None:
        data[key] = value
    else:
        data[key] = {**data[key], entry: value}


def repository_path(path: str | os.PathLike) -> str | None:
    """``path`` relative to the repository's root (``genodiff.resources.resource_root``, in
    POSIX spelling) when it lies there; None otherwise."""
    path, root = Path(path).resolve(), resource_root().resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else None


def portable_data(
    data: Mapping[str, Any],
    source: str | None = None,
    known: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``data:`` section ``data`` with no path of this machine, and the record of each of
    its files: each file named by its repository path when it lies in the repository, else by
    its name; any other path key (``cache_dir``: a machine's own) unset. ``source`` says where
    to get the files that do not lie in the repository (recorded with each). ``known``: the
    records of a model exported so before, kept for the files its section already names
    portably."""
    recorded = {(r["key"], r.get("entry")): r for r in known or ()}
    places = data_file_places(data)
    portable = dict(data)
    records = []
    for place, value in places:
        record = recorded.get(place) if not Path(value).is_absolute() else None
        if record is None:
            record = _file_record(place, value, source)
        elif record.get("path") is None and source is not None:
            record = {**record, "source": source}
        _with(portable, place, record["path"] or record["file"])
        records.append(record)
    files = {key for (key, _), _ in places}
    for key in registry.get("data", data["name"]).path_keys:
        if key not in files and data.get(key) is not None:
            portable[key] = None
    return portable, records


def _file_record(place: Place, value: str, source: str | None) -> dict[str, Any]:
    """The record of the file ``place`` names as ``value`` (a relative path: the
    repository's, as the shipped configs name their files)."""
    path = Path(value) if Path(value).is_absolute() else resource(value)
    in_repository = repository_path(path) if path.exists() else None
    return {
        "key": place[0],
        "entry": place[1],
        "file": path.name,
        "path": in_repository,
        "content_sha256": content_sha256(path) if path.is_file() else None,
        "source": None if in_repository else source,
    }


def portable_record(
    config: Mapping[str, Any],
    source: str | None = None,
    known: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The genodiff.json entries of a model whose run's ``config`` must name no path of this
    machine: ``config`` with its data section made portable (``portable_data``; ``source``:
    where to get the files that are not the repository's; ``known``: the records of an
    earlier portable export) and ``RUN_PATH_KEYS`` holding an absolute path by its last
    component (a Hub id, ``last``, a relative path stay), and the records of its data
    files."""
    portable = {
        key: Path(value).name
        if key in RUN_PATH_KEYS and isinstance(value, str) and Path(value).is_absolute()
        else value
        for key, value in config.items()
    }
    records: list[dict[str, Any]] = []
    if "data" in config:
        portable["data"], records = portable_data(config["data"], source, known)
    return {"config": portable, DATA_FILES_KEY: records}


def locate_data(
    data: Mapping[str, Any],
    records: list[dict[str, Any]] | None = None,
    copies: Mapping[str, Any] | None = None,
    point: str | None = None,
    copy_form: str = "{keyword}",
) -> dict[str, Any]:
    """The ``data:`` section ``data`` of a loaded model with each data file at a path of this
    machine: the copy ``copies`` gives for its key (``{"fasta": PATH}``, or for a mapping key
    ``{"fasta_by_label": {"human": PATH}}``), else the repository's file that ``records``
    (``portable_data``'s, None for a model that has none) names, else the path the run
    recorded. A copy or a repository file must have the recorded content sha256
    (InputValueError). A file that is nowhere is an InputFileNotFoundError naming it, its
    sha256, where to get it and ``point``, what to do then (``{keyword}`` in it is the
    keyword that takes a copy: ``then give its path: model.windows(split, {keyword})``;
    ``{option}`` the place as a dotted option, ``fasta_by_label.human``). ``copy_form``: how
    the caller gives a copy of a file, spelled as in ``point`` (``{keyword}`` in Python
    keywords, ``{option}=PATH (data_files)`` for a mapping by dotted place); a copy ``copies``
    names no file for is refused in it (InputValueError naming the model's files)."""
    recorded = {(r["key"], r.get("entry")): r for r in records or ()}
    given = _copies(data, copies or {}, copy_form)
    located = dict(data)
    for place, value in data_file_places(data):
        path = _file_here(place, value, recorded.get(place, {}), given.get(place), point)
        _with(located, place, str(path))
    return located


def _file_here(
    place: Place, value: str, record: Mapping[str, Any], copy: Path | None, point: str | None
) -> Path:
    """Where the file that ``place`` names as ``value`` is on this machine: ``copy`` when
    given, the path the run recorded when it is absolute (where that lies in another
    install's bundle of shipped files and is gone, this install's copy: ``bundled_copy``),
    else the repository's file the ``record`` names; a copy or a repository file checked
    against the record's sha256."""
    if copy is not None:
        if not copy.exists():
            raise InputFileNotFoundError(
                f"{copy} not found (the copy given for {_described(place, value, record)})",
                parameter=place[0],
            )
        path = copy
    elif Path(value).is_absolute():  # the run's own path (a .ckpt, an export made in place)
        if Path(value).exists():
            return Path(value)
        path = bundled_copy(value)  # a shipped file of an install since gone
        if path is None:
            raise _missing(place, value, record, Path(value), point)
    elif record and record.get("path") is None:  # not in the repository: a copy is needed
        raise _missing(place, value, record, None, point)
    else:
        path = resource(record.get("path") or value)
        if not path.exists():
            raise _missing(place, value, record, path, point)
    if record.get("content_sha256") and path.is_file():
        _check_content(path, place, record)
    return path


def _copies(data: Mapping[str, Any], copies: Mapping[str, Any], form: str) -> dict[Place, Path]:
    """The copies the caller gives, by place; InputValueError (its message giving a copy as
    ``form`` spells it, ``locate_data``'s ``copy_form``) for a keyword that names no file of the
    data, a mapping key's entry it does not have, or a value that is not what the key takes."""
    places = [place for place, _ in data_file_places(data)]
    out: dict[Place, Path] = {}
    for key, value in copies.items():
        own = [place for place in places if place[0] == key]
        if not own:
            raise _no_such_file(key, data["name"], places, form)
        if own == [(key, None)]:
            out[(key, None)] = _path((key, None), value, form)
            continue
        entries = [entry for _, entry in own]
        unknown = [str(e) for e in value if e not in entries] if isinstance(value, Mapping) else []
        if not isinstance(value, Mapping) or unknown:
            said = f"has no entry {', '.join(unknown)}" if unknown else "holds one file per entry"
            raise InputValueError(
                f"{key} {said}; its entries: {listing(entries)}; give a copy of one as "
                f"{_spelled(form, own[0])}",
                parameter=DATA_FILES_PARAMETER,
            )
        out.update({(key, entry): _path((key, entry), path, form) for entry, path in value.items()})
    return out


def _no_such_file(key: str, name: str, places: list[Place], form: str) -> InputValueError:
    """The error for a copy given under ``key``, which the model's data (module ``name``,
    files at ``places``) does not have."""
    files = listing([_option(place) for place in places]) or "none"
    then = f"; give a copy of one as {_spelled(form, places[0])}" if places else ""
    return InputValueError(
        f"{key}: the model's data ({name}) has no file by that name; its files: {files}{then}",
        parameter=DATA_FILES_PARAMETER,
    )


def _path(place: Place, value: Any, form: str) -> Path:
    if not isinstance(value, str | os.PathLike):
        got = "entries" if isinstance(value, Mapping) else f"a value of type {type(value).__name__}"
        raise InputValueError(
            f"{_option(place)} takes the path of a file, not {got}; give a copy as "
            f"{_spelled(form, place)}",
            parameter=DATA_FILES_PARAMETER,
        )
    return Path(value).expanduser()


def _option(place: Place) -> str:
    """``fasta``, ``fasta_by_label.human``: a place as a dotted key of the data section."""
    return dotted(place).removeprefix("data.")


def _spelled(template: str, place: Place) -> str:
    """``template`` (``locate_data``'s ``point`` or ``copy_form``) for ``place``."""
    return template.format(keyword=_keyword(place), option=_option(place))


def _keyword(place: Place) -> str:
    key, entry = place
    return f"{key}=PATH" if entry is None else f"{key}={{{entry!r}: PATH}}"


def _described(place: Place, value: str, record: Mapping[str, Any]) -> str:
    """``chrX.fa.gz (data.fasta, content sha256 ...)``: the file a model was trained on."""
    name = record.get("file") or Path(value).name
    sha = record.get("content_sha256")
    digest = f", content sha256 {sha} when uncompressed" if sha else ""
    return f"{name} ({dotted(place)}{digest})"


def _missing(
    place: Place,
    value: str,
    record: Mapping[str, Any],
    path: Path | None,
    point: str | None,
) -> InputFileNotFoundError:
    where = "which genodiff does not ship" if path is None else f"which is not at {path}"
    source = record.get("source")
    get = f"get it from {source}" if source else "find a copy of it"
    then = f", {_spelled(point, place)}" if point else ""
    return InputFileNotFoundError(
        f"this model was trained on {_described(place, value, record)}, {where}; {get}{then}",
        parameter=place[0],
    )


def _check_content(path: Path, place: Place, record: Mapping[str, Any]) -> None:
    got = content_sha256(path)
    if got != record["content_sha256"]:
        raise InputValueError(
            f"{path} is not a copy of {_described(place, str(path), record)}, which this model "
            f"was trained on: its content's sha256 is {got}; give a copy of that file",
            parameter=place[0],
        )
