"""Which version of a remote file a download's ``.part`` holds, recorded beside it.

A resumed download appends the server's bytes to those of an earlier run, so both must come
from the same version of the file. The server names the version with a validator: its
``ETag`` (a strong one only; a weak ``W/"..."`` may not be sent in ``If-Range``), else its
``Last-Modified``. ``genodiff.data.download`` records it in ``NAME.part.validator`` (one JSON
object, written atomically) when it starts the part at byte 0, sends it as ``If-Range`` when it
resumes (a server whose file changed then answers 200 with the whole file), and takes a
response that names another version as a changed file even from a server that ignores
``If-Range``. A server that sends no validator leaves no record, and its parts resume unchecked.
"""

from __future__ import annotations

import json
import re
from email.message import Message
from pathlib import Path

from genodiff.atomic_files import write_text

Validator = tuple[str, str]  # (the header that gave it, "ETag" or "Last-Modified"; its value)
RECORD_SUFFIX = ".validator"
_HEADERS = ("ETag", "Last-Modified")
# A value genodiff keeps and sends back: printable ASCII on one line, of bounded length.
_VALUE = re.compile(r"[\x20-\x7e]{1,1024}")


def validator_of(headers: Message) -> Validator | None:
    """The validator a response's ``headers`` give: a strong ETag, else Last-Modified; None
    when they give neither (or only a value that is no header to send back)."""
    etag = (headers.get("ETag") or "").strip()
    if _VALUE.fullmatch(etag) and not etag.startswith("W/"):
        return "ETag", etag
    modified = (headers.get("Last-Modified") or "").strip()
    return ("Last-Modified", modified) if _VALUE.fullmatch(modified) else None


def names_another_version(headers: Message, validator: Validator | None) -> bool:
    """Whether a response's ``headers`` name another version of the file than ``validator``
    (False when either says nothing of it)."""
    if validator is None:
        return False
    name, value = validator
    said = headers.get(name)
    return said is not None and said.strip() != value


def record_path(part: Path) -> Path:
    """Where the validator of the download ``part`` is recorded: ``NAME.part.validator``."""
    return part.with_name(part.name + RECORD_SUFFIX)


def read_record(record: Path) -> Validator | None:
    """The validator ``record`` holds; None when there is none (a part of a server that gave
    none, or of an older genodiff). ValueError, saying what is wrong, for a file that is no
    record ``write_record`` writes."""
    try:
        with open(record, "rb") as handle:
            data = handle.read(4096)  # a record is well under this
    except FileNotFoundError:
        return None
    try:
        saved = json.loads(data)
    except ValueError:  # not JSON, not UTF-8
        saved = None
    if isinstance(saved, dict) and len(saved) == 1:
        ((name, value),) = saved.items()
        if name in _HEADERS and isinstance(value, str) and _VALUE.fullmatch(value):
            return name, value
    raise ValueError(f"{record.name} is no record of the server's version of the file")


def write_record(record: Path, validator: Validator | None) -> None:
    """Record ``validator`` in ``record`` (atomically), or remove the record when None."""
    if validator is None:
        record.unlink(missing_ok=True)
    else:
        write_text(record, json.dumps(dict([validator])))
