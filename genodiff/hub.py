"""Checkpoint references: a local path, a named model, or a Hugging Face Hub id
``org/name[@revision]``.

Every place that takes a checkpoint (``load_pretrained``, ``init_from=``, ``pretrained=``, the
one loader ``genodiff.checkpoints.load.open_checkpoint`` and so ``load_model``,
``load_classifier``, ``load_finetuned_classifier``, ``genodiff sample/eval --checkpoint``,
``--classifier``, ``evaluate-samples --oracle``, ``genodiff info``) resolves it here, to a
local file or folder:

- a path that exists on disk is used as it is, so a local folder always wins over a Hub id
  of the same spelling, and over a named model of the same spelling, with a warning naming
  both (``./NAME`` names the local one without it);
- a name of a model that ships with genodiff or lies in ``GENODIFF_MODELS_PATH``
  (``genodiff.named_models``) is its folder;
- otherwise ``org/name`` (optionally ``@revision``: a branch, tag or commit) is fetched with
  ``huggingface_hub.snapshot_download`` into its cache, and the snapshot folder is returned.
  Only the files the caller reads are fetched (``patterns``).

The usual Hugging Face variables apply: ``HF_HUB_OFFLINE=1`` (cache only), ``HF_HUB_CACHE``
(the cache folder), ``HF_ENDPOINT`` (a mirror), ``HF_TOKEN`` (private or gated repositories).
genodiff reads them when a reference is resolved, so setting them in a running notebook works;
only turning HF_HUB_OFFLINE off again needs a new process (huggingface_hub reads it at import).
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from genodiff.errors import InputFileNotFoundError, InputValueError, UserInputError
from genodiff.named_models import close_names, incomplete_model, named_model_folder
from genodiff.user_warnings import warn_user

# Hub repository names: letters, digits, '-', '_', '.', not starting with a separator.
_HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>\S+))?")
_TRUE = {"1", "ON", "YES", "TRUE"}


class HubError(UserInputError, OSError):
    """A Hub id that could not be resolved; the message says what to do."""


@dataclass(frozen=True)
class HubId:
    """A parsed ``org/name[@revision]``."""

    repo_id: str
    revision: str | None = None

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def parse_hub_id(reference: str | os.PathLike) -> HubId | None:
    """The Hub id ``reference`` spells, or None when it cannot be one (``./x``, ``/a/b``,
    ``a/b/c``, ``model.ckpt``)."""
    match = _HUB_ID.fullmatch(str(reference))
    return HubId(match["repo"], match["revision"]) if match else None


def resolve(reference: str | os.PathLike, patterns: Sequence[str]) -> Path:
    """The local file or folder ``reference`` names: itself when it exists, else the snapshot
    folder of the Hub id it spells, holding the repository's files that match ``patterns``
    (fnmatch globs such as ``config.json`` or ``*.ckpt``). An empty reference (which
    ``Path`` would read as the working directory) or one of another type is an
    InputValueError."""
    if not isinstance(reference, str | os.PathLike) or not str(reference):
        raise InputValueError(
            f"a checkpoint must be named by a path, a model's name or a Hugging Face Hub id "
            f"org/name[@revision], got {reference!r}"
        )
    path = Path(reference).expanduser()
    if path.exists():
        _warn_if_shadowing_a_named_model(reference, path)
        return _not_a_name(path)
    named = named_model_folder(reference)
    if named is not None:
        return named
    hub_id = parse_hub_id(reference)
    if hub_id is None:
        close = close_names(reference)
        meant = f"; did you mean {' or '.join(close)}?" if close else ""
        partial = incomplete_model(str(reference))
        raise InputFileNotFoundError(
            f"{reference}: not found (no such file or folder, named model (genodiff models "
            f"lists them) or Hugging Face Hub id org/name[@revision]){partial}{meant}"
        )
    try:
        folder = Path(_snapshot(hub_id, list(patterns)))
    except HubError as err:
        raise HubError(
            f"{_not_on_disk(reference, path)}, and as a Hugging Face Hub id {err}"
        ) from err.__cause__
    if not folder.is_dir():
        raise HubError(
            f"{_not_on_disk(reference, path)}, and the Hub repository {hub_id.repo_id} holds "
            f"none of the files genodiff reads ({', '.join(patterns)})"
        )
    return folder


def _warn_if_shadowing_a_named_model(reference: str | os.PathLike, path: Path) -> None:
    """A warning when the local ``path`` that ``reference`` names is not the named model it
    also spells: the local one is read, which its errors would not say."""
    named = named_model_folder(reference)
    if named is not None and path.resolve() != named:
        warn_user(
            f"{reference} is the local {'folder' if path.is_dir() else 'file'} "
            f"{path.resolve()}, which wins over the model named {reference} ({named}); "
            f"write ./{reference} for the local one, or {named} for the named model"
        )


def _not_a_name(path: Path) -> Path:
    """``path``, absolute where it is spelled as a named model (``./NAME`` reads as ``NAME``),
    so that a later resolve of it (a folder's weights are located, then read) is this local
    one again, without the warning ``./NAME`` was written to avoid."""
    return path.absolute() if named_model_folder(path) is not None else path


def _not_on_disk(reference: str | os.PathLike, path: Path) -> str:
    """``REFERENCE: no local file or folder of that name``; where its first part is a local
    folder (``outputs/dmeo``: most likely a mistyped path, not a Hub id), the names in that
    folder spelled close to it."""
    said = f"{reference}: no local file or folder of that name"
    if not (path.parent.is_dir() and os.access(path.parent, os.R_OK)):
        return said
    close = difflib.get_close_matches(path.name, sorted(os.listdir(path.parent)), n=3)
    if not close:
        return f"{said} in the local folder {path.parent}"
    meant = " or ".join(str(path.parent / name) for name in close)
    return f"{said} (did you mean {meant}?)"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in _TRUE


def snapshot(repository: str, patterns: Sequence[str], cache_dir: str | None = None) -> Path:
    """The local snapshot folder of the Hub repository ``repository`` (``[org/]name[@revision]``,
    a legacy id without org too: ``gpt2-large``), holding its files that match ``patterns``:
    from the cache, else downloaded (into ``cache_dir``, default the Hugging Face cache). For a
    plugin that hands a Hub model to another library (``transformers``): that library's own
    download retries an unreachable Hub for most of a minute, this one says at once what to do
    (``HubError``). A cached file is returned as it is: when the library then fails to read
    the folder, ``unreadable_cache_entry`` names a damaged one."""
    repo_id, _, revision = repository.partition("@")
    return Path(_snapshot(HubId(repo_id, revision or None), list(patterns), cache_dir))


def _snapshot(hub_id: HubId, patterns: list[str], cache_dir: str | None = None) -> str:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import FileMetadataError, HfHubHTTPError, LocalEntryNotFoundError

    offline = _env_flag("HF_HUB_OFFLINE") or constants.HF_HUB_OFFLINE
    cache = cache_dir or os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE
    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    try:
        return snapshot_download(
            hub_id.repo_id,
            revision=hub_id.revision,
            allow_patterns=patterns,
            cache_dir=cache,
            endpoint=endpoint,
            local_files_only=offline,
        )
    except LocalEntryNotFoundError as err:
        download = f"`{_download_command(hub_id)}` (into the same HF_HUB_CACHE)"
        if offline:
            why = f"downloads are off (HF_HUB_OFFLINE=1). Pre-download it with {download}, or "
            why += "set HF_HUB_OFFLINE=0 to let genodiff fetch it"
        elif isinstance(err.__cause__, FileMetadataError):  # an answer, without a Hub's headers
            why = (
                f"{endpoint} answered, but not as a Hugging Face Hub does "
                f"({_first_line(err.__cause__)}): point HF_ENDPOINT at a Hub or a mirror of one"
            )
        else:
            why = f"{endpoint} is unreachable. Pre-download it where the network is: {download}"
        raise HubError(f"it is not in the cache ({cache}) and {why}") from err
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        raise HubError(
            f"{endpoint} refused it (HTTP {status}): check the spelling and the revision; a "
            "private or gated repository needs HF_TOKEN"
        ) from err
    except (*_transfer_errors(), OSError) as err:  # a transfer failed after the retries
        if isinstance(err, OSError) and err.errno is not None:
            raise  # the disk or the cache folder (full, not writable): said as it is
        raise HubError(
            f"its download from {endpoint} broke off ({_first_line(err)}): run again "
            f"to resume it, or pre-download it with `{_download_command(hub_id)}` (into the "
            "same HF_HUB_CACHE)"
        ) from err


def _first_line(err: BaseException) -> str:
    """The first line of ``err``'s message (huggingface_hub's size check adds advice for its
    own API on a second), else the error's kind."""
    return next(iter(str(err).splitlines()), "") or type(err).__name__


def _transfer_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub's HTTP library raises when a connection fails in a transfer (a
    timeout, a body cut short): ``TransportError`` of httpx2 (huggingface_hub 2) or httpx (1),
    ``RequestException`` of requests (before 1.0); those of the libraries installed."""
    errors = []
    for module, name in (
        ("httpx2", "TransportError"),
        ("httpx", "TransportError"),
        ("requests", "RequestException"),
    ):
        try:
            errors.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def unreadable_cache_entry(folder: Path) -> str | None:
    """Why the Hub snapshot folder ``folder`` (as ``snapshot`` returned it) does not load,
    when one of its cached files is damaged: a sentence naming the file, what is wrong with it
    and what to do (``redownload_advice``); None when every file checks. For a caller whose
    library failed to read the files: a damaged cache entry is present, so "not in the cache"
    would mislead."""
    for path in sorted(folder.rglob("*")):
        problem = _file_problem(path) if path.is_file() or path.is_symlink() else None
        if problem is not None:
            advice = redownload_advice(path, "download it again")
            return f"its cached file {path} is present but unreadable ({problem}): {advice}"
    return None


def redownload_advice(path: Path, otherwise: str) -> str:
    """What to do about a damaged file ``path``: where it lies in a Hugging Face cache entry
    (``.../models--ORG--NAME/snapshots/COMMIT/...``, or its ``blobs/``, where ``snapshot``
    keeps a Hub model's files), delete the entry and download it again (a download into the
    cache keeps a blob it already holds, damaged or not); ``otherwise`` for a file anywhere
    else (one's own). For an error's message: called as it is raised."""
    parts = Path(path).parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] in ("snapshots", "blobs"):
            repo_id = part.removeprefix("models--").replace("--", "/", 1)  # ids have no "--"
            commit = parts[i + 2] if parts[i + 1] == "snapshots" else None
            command = _download_command(HubId(repo_id, commit))
            return (
                f"delete the folder {Path(*parts[: i + 1])} and download it again with "
                f"`{command}` (into the same HF_HUB_CACHE)"
            )
    return otherwise


#: The largest JSON file of a snapshot that ``unreadable_cache_entry`` parses: a record's
#: bound (``plain_records.MAX_JSON_BYTES``), so that a hostile file costs bounded memory.
CHECKED_JSON_BYTES = 64 << 20


def _file_problem(path: Path) -> str | None:
    """What is wrong with the cached file ``path``, by what its name says it holds (a link to
    a missing blob, JSON that does not parse, a safetensors file that does not cover its
    header's tensors), or None."""
    if path.is_symlink() and not path.exists():
        return "a link to a missing blob"
    if not path.is_file():  # a FIFO would block the read, a device never end it
        return "not a regular file"
    try:
        if path.suffix == ".json":
            with path.open("rb") as file:
                data = file.read(CHECKED_JSON_BYTES + 1)
            if len(data) <= CHECKED_JSON_BYTES:  # a larger one is no record: not judged here
                json.loads(data)
        if path.suffix == ".safetensors":
            return _safetensors_problem(path)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        return f"not JSON: {err}"
    except OSError as err:
        return f"it cannot be read: {err.strerror or err}"
    return None


def _safetensors_problem(path: Path) -> str | None:
    """Whether safetensors reads ``path`` as whole: its header, and tensors' bytes that cover
    the file exactly (a file cut short or grown is refused by the library)."""
    import safetensors

    try:
        with safetensors.safe_open(str(path), framework="pt"):
            return None
    except safetensors.SafetensorError as err:
        return str(err).splitlines()[0] if str(err) else type(err).__name__


def _download_command(hub_id: HubId) -> str:
    import huggingface_hub

    # huggingface_hub 1.0 renamed the command line tool from huggingface-cli to hf.
    tool = "hf" if int(huggingface_hub.__version__.split(".")[0]) >= 1 else "huggingface-cli"
    revision = f" --revision {hub_id.revision}" if hub_id.revision else ""
    return f"{tool} download {hub_id.repo_id}{revision}"
