"""Torch checkpoint files (.ckpt, .bin): crash-safe writes, the one safe reader, and telling a
loadable checkpoint from a damaged one.

Every checkpoint ``genodiff train`` and ``genodiff finetune`` write goes through
``AtomicCheckpointIO`` (a Lightning ``CheckpointIO`` plugin, in ``lightning_io`` so that
loading imports no Lightning): the file is written beside its
target under a hidden temporary name, flushed to disk, then renamed over the target
(``genodiff.atomic_files``), so a ``kill -9`` at any moment leaves either the
previous file or the new one, never a truncated one; a full disk is one clear error and
keeps the previous file too.

Every torch file genodiff and its plugins read goes through ``read_checkpoint_file``: the CRC
of every member of its zip archive checked, then unpickled with ``weights_only`` and a short,
named allow-list (``SAFE_GLOBALS``: the OmegaConf containers the hyper-parameters of HyenaDNA's
and upstream MDLM's Lightning checkpoints hold), so a file from the Hub can hold no code that
runs on loading. A file that needs anything else is refused in one line
(``UnsafePickleError``); with ``stub_unknown_classes=True`` each other global is read as an
inert ``Placeholder`` (the data it was built from kept, none of its code run), which is enough
to take the weights out of another project's checkpoint. No path unpickles with code; Lightning's
own reads (a resume, ``trainer.test`` of a checkpoint) go through it too, by
``AtomicCheckpointIO.load_checkpoint``.
"""

from __future__ import annotations

import collections
import pickle
import re
import typing
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig
from omegaconf.base import ContainerMetadata, Metadata
from omegaconf.nodes import AnyNode, BooleanNode, BytesNode, FloatNode, IntegerNode, StringNode

from genodiff.errors import InputValueError, listing, require_regular_file
from genodiff.hub import redownload_advice
from genodiff.memory import memory_available, size_text

# Training checkpoints' record of the run so far: {"tokens_seen": int, "data_digest": str|None}.
RUN_STATE_KEY = "genodiff_run"
# What a guidance classifier's checkpoint (``genodiff classifier``) holds besides its weights
# (``genodiff.classifiers.checkpoint``); a generator's checkpoint has no such entry.
CLASSIFIER_RECORD_KEY = "genodiff_classifier"
# What a fine-tuned classifier's checkpoint (``genodiff finetune``) holds in its hyper-parameters
# to be rebuilt (``genodiff.finetuning.trained``).
FINETUNED_RECORD_KEY = "finetuned_classifier"

# The classes, besides tensors and plain containers, that the Lightning checkpoints of HyenaDNA
# (weights.ckpt) and upstream MDLM hold in their hyper-parameters: a Hydra config as OmegaConf
# containers, with their metadata, value nodes and the types that metadata records (object,
# key, element and reference types: typing.Any, dict, list, int, ...; a resolver cache that is a
# defaultdict). Each is data, rebuilt by the class's own code from plain values; allow-listed
# for one read at a time (``torch.serialization.safe_globals``), never globally.
SAFE_GLOBALS: list[Any] = [
    DictConfig,
    ListConfig,
    ContainerMetadata,
    Metadata,
    AnyNode,
    StringNode,
    IntegerNode,
    FloatNode,
    BooleanNode,
    BytesNode,
    (typing.Any, "typing.Any"),
    collections.defaultdict,
    dict,
    list,
    int,
    float,
    str,
    bool,
    bytes,
]


def read_checkpoint_file(
    path: str | Path,
    map_location: str | torch.device = "cpu",
    *,
    stub_unknown_classes: bool = False,
    mmap: bool = False,
) -> Any:
    """The object a torch file (.ckpt, .bin) holds. Every torch file genodiff and its plugins
    read goes through here, so a file that is empty, truncated, corrupt, damaged after it was
    written (``verify_archive``) or not a torch file gives one ValueError naming it.

    The file is unpickled with ``weights_only``: tensors, plain containers and the classes of
    ``SAFE_GLOBALS`` (allow-listed for this call only), never code, since files come from the
    Hub and other people. A file that needs any other global is refused with an
    ``UnsafePickleError`` naming them; ``stub_unknown_classes=True`` reads each of them as a
    ``Placeholder`` instead (still ``weights_only``: no code from the file runs). ``mmap`` maps
    the tensors instead of reading them (for a look at the rest), where the file stores them
    uncompressed (torch.save's way; a re-zipped file's are read). A path that is no regular
    file (a folder, a FIFO, a device) is an input error, never opened."""
    path = require_regular_file(path, "checkpoint")  # a FIFO would block, a device never end
    try:
        mappable = verify_archive(path)  # a deflated member is read, not mapped
        return _load_weights_only(path, map_location, mmap and mappable, stub_unknown_classes)
    except (FileNotFoundError, IsADirectoryError, PermissionError, MemoryError, InputValueError):
        raise
    except Exception as err:  # noqa: BLE001 (torch raises many kinds for a damaged file)
        if isinstance(err, torch.OutOfMemoryError):
            raise
        needed = _unsafe_globals(path, err) if isinstance(err, pickle.UnpicklingError) else []
        if needed:
            raise UnsafePickleError(path, needed) from None
        empty = path.is_file() and path.stat().st_size == 0
        if not empty and not _begins_as_a_torch_file(path):
            raise InputValueError(
                f"{path} is not a loadable genodiff checkpoint: it is no PyTorch file at all (a "
                "config, a FASTA?); give a training checkpoint (a run's checkpoints/last.ckpt), "
                "a run folder or an export folder"
            ) from None
        detail = "the file is empty" if empty else _first_sentence(err)
        advice = redownload_advice(
            path, "use another checkpoint, e.g. the run's last.ckpt, or copy it again"
        )
        raise InputValueError(
            f"{path} is not a loadable genodiff checkpoint (truncated or corrupt? {detail}); "
            f"{advice}"
        ) from None


# How a torch file begins: a zip archive (torch.save's format since PyTorch 1.6) or a pickle of
# protocol 2 or later (its legacy format). A damaged or truncated torch file still begins so.
TORCH_FILE_STARTS = (b"PK\x03\x04", b"\x80")


def _begins_as_a_torch_file(path: Path) -> bool:
    """True when ``path`` begins as a torch file does (``TORCH_FILE_STARTS``), damaged or not;
    False for another kind of file (a YAML config, a FASTA given as a checkpoint). True, too,
    when ``path`` cannot be read (a symlink loop, an I/O error): it is called while handling
    the load's own error, which then names the path and the reason."""
    try:
        with open(path, "rb") as file:
            return file.read(4).startswith(TORCH_FILE_STARTS)
    except OSError:
        return True


def _load_weights_only(
    path: Path, map_location: str | torch.device, mmap: bool, stub_unknown_classes: bool
) -> Any:
    """``torch.load`` with ``weights_only`` and ``SAFE_GLOBALS``; with ``stub_unknown_classes``
    every other global the file names is allow-listed as a ``Placeholder`` of that name, found
    read from a zip archive's pickle before loading, else (torch's legacy format) round by
    round from the weights_only unpickler's refusals; a global from a module torch blocks
    outright (``os``, ``sys``) is refused even then."""
    stubbed = (_archive_globals(path) or []) if stub_unknown_classes else []
    while True:
        placeholders = [(placeholder_class(name), name) for name in stubbed]
        try:
            with torch.serialization.safe_globals([*SAFE_GLOBALS, *placeholders]):
                return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
        except pickle.UnpicklingError as err:
            if not stub_unknown_classes:
                raise
            blocked = re.search(r"GLOBAL ([\w.]+) whose module \w+ is blocked", str(err))
            if blocked:  # os / sys: no placeholder either, torch never lets a file name them
                raise InputValueError(
                    f"{path} was not loaded: it names {blocked[1]}, from a module a checkpoint "
                    "never needs (it runs commands or changes the interpreter), so it is refused "
                    "even with placeholders; nothing was run. Use a checkpoint from another source"
                ) from None
            more = [name for name in _unsafe_globals(path, err) if name not in stubbed]
            if not more:  # refused for another reason than a global
                why = re.search(r"WeightsUnpickler error:\s*([^\n]+)", str(err))
                raise InputValueError(
                    f"{path} could not be read with placeholders for {listing(stubbed)} "
                    f"({why[1][:160] if why else _first_sentence(err)})"
                ) from None
            stubbed += more


class Placeholder:
    """An object of a class outside the allow-list, read as data: the arguments it was built
    with (``args``) and its pickled state (``state``; a dict state's fields read as
    attributes, as on the real object). None of the class's code runs; ``qualified_name`` says
    which class (or function) the file named. (A subclass of list or dict cannot stand in:
    torch's weights_only unpickler fills real lists and dicts only, and says so.)"""

    qualified_name = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> Placeholder:
        placeholder = object.__new__(cls)
        placeholder.args, placeholder.state = args, None
        return placeholder

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # built in __new__; nothing runs
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __getattr__(self, name: str) -> Any:
        """The pickled state's field ``name``, as the real object's attribute would be."""
        state = self.__dict__.get("state")
        if isinstance(state, dict) and name in state:
            return state[name]
        raise AttributeError(f"the placeholder for {self.qualified_name} has no {name!r}")

    def __repr__(self) -> str:
        return f"<placeholder for {self.qualified_name}>"


def placeholder_class(qualified_name: str) -> type[Placeholder]:
    """A ``Placeholder`` subclass standing for the global ``qualified_name`` (module.name)."""
    name = qualified_name.rsplit(".", 1)[-1]
    return type(name, (Placeholder,), {"qualified_name": qualified_name})


def _archive_globals(path: Path) -> list[str] | None:
    """The globals (``module.name``) outside ``SAFE_GLOBALS`` and torch's own allow-list that
    the torch file ``path`` needs, read from its pickle without running it; None for a file
    that is not a (readable) zip archive."""
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception:  # noqa: BLE001 (not a zip archive, or a damaged one)
        return None


def _unsafe_globals(path: Path, err: Exception) -> list[str]:
    """``_archive_globals``; for a file in torch's legacy format (no zip archive to read them
    from), the one ``err``, the refusal of the weights_only unpickler, names."""
    listed = _archive_globals(path)
    if listed is not None:
        return listed
    named = re.findall(r"GLOBAL ([\w.]+)", str(err))  # torch drops "builtins." there
    return sorted({name if "." in name else f"builtins.{name}" for name in named})


class UnsafePickleError(InputValueError):
    """A torch file that needs globals outside the allow-list (``SAFE_GLOBALS``) to be
    unpickled: unpickling them could run any code, so it is refused; the caller may read them
    as inert placeholders instead (``stub_unknown_classes=True``)."""

    def __init__(
        self, path: Path, needed: list[str], opt_in: str = "stub_unknown_classes=True"
    ) -> None:
        self.path, self.needed = path, needed
        super().__init__(
            f"{path} was not loaded: it needs {listing(needed)} to be unpickled, outside "
            "genodiff's allow-list of checkpoint contents (unpickling them could run any code; "
            f"nothing was run); {opt_in} reads them as inert placeholders, enough for the "
            "weights"
        )

    def offering(self, opt_in: str) -> UnsafePickleError:
        """The same refusal naming another spelling of the opt-in (a command line's flag)."""
        return UnsafePickleError(self.path, self.needed, opt_in)


def _first_sentence(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if text.isdigit():  # torch's legacy loader raises KeyError(<a byte>) for a non-torch file
        return "not a torch file"
    return text.split(". ")[0][:160]


class DamagedFileError(InputValueError):
    """A file whose bytes changed after it was written (a checksum it holds does not match)."""


def verify_archive(path: Path) -> bool:
    """DamagedFileError when ``path`` is a zip archive (torch's format) whose bytes changed
    after it was written: the CRC-32 of a member does not match. torch.load does not check
    them, so a flipped byte inside a tensor would otherwise load as a slightly different
    model. A file that is not a zip archive is left to torch.load to judge. Returns whether
    its tensors can be memory-mapped: every member stored (torch.save's way), none deflated
    (a re-zipped file)."""
    try:
        with zipfile.ZipFile(path) as archive:
            _refuse_a_bomb(path, archive)
            damaged = archive.testzip()
            stored = all(m.compress_type == zipfile.ZIP_STORED for m in archive.infolist())
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError):
        return False  # not a zip archive (or torch's legacy format): torch.load says what is wrong
    if damaged is not None:
        advice = redownload_advice(
            path, "use another checkpoint, e.g. the previous one, or copy it again"
        )
        raise DamagedFileError(
            f"{path} is damaged: its bytes changed after it was written (the checksum of "
            f"{damaged} does not match); {advice}"
        )
    return stored


#: How many times its compressed size a deflated member may say it expands to: deflate cannot
#: expand more than 1,032 times (a run of zeros, such as an all-zero tensor, comes near it), so
#: a header that says more is no deflate stream's.
MAX_DEFLATE_EXPANSION = 1100


def _refuse_a_bomb(path: Path, archive: zipfile.ZipFile) -> None:
    """An input error, before anything is decompressed, when a member of ``archive`` is
    compressed in a way torch.load cannot read (only stored and deflated members), says it
    expands more than deflate can (``MAX_DEFLATE_EXPANSION``), or when the deflated members
    together expand to more than this machine's memory (torch.load holds them decompressed):
    a zip bomb, a few megabytes that read as a terabyte, in hours."""
    inflated = 0
    for member in archive.infolist():
        if member.compress_type == zipfile.ZIP_STORED:
            continue
        if member.compress_type != zipfile.ZIP_DEFLATED:
            raise InputValueError(
                f"{path} was not loaded: its member {member.filename} is compressed with zip "
                f"method {member.compress_type}, which torch.load cannot read (stored or "
                "deflated only); use a checkpoint from another source"
            )
        if member.file_size > MAX_DEFLATE_EXPANSION * member.compress_size + 1024:
            raise InputValueError(
                f"{path} was not loaded: its member {member.filename} says it expands from "
                f"{member.compress_size:,} to {member.file_size:,} bytes, more than deflate "
                "can (a damaged or forged zip header); use a checkpoint from another source"
            )
        inflated += member.file_size
    host = memory_available(torch.device("cpu"))[1]
    if inflated > host:
        raise InputValueError(
            f"{path} was not loaded: its deflated members expand to {size_text(inflated)}, "
            f"more than this machine's {size_text(host)} of memory; store them uncompressed "
            "(as torch.save does), or load it on a larger machine"
        )


def loadable_checkpoint(path: Path) -> dict[str, Any] | None:
    """What ``path`` holds when it is a complete training checkpoint: an intact torch file that
    ``read_checkpoint_file`` reads (every member's CRC checked, nothing outside the allow-list;
    tensors mapped from the file, not read) to a dict with ``state_dict`` and ``global_step``;
    None otherwise."""
    try:
        checkpoint = read_checkpoint_file(path, mmap=True)
    except Exception:  # any failure to read it means it cannot be resumed from
        return None
    complete = isinstance(checkpoint, dict) and {"state_dict", "global_step"} <= checkpoint.keys()
    return checkpoint if complete else None


def tensor_bytes(value: Any) -> int:
    """The bytes of the tensors in ``value`` (nested dicts, lists and tuples): about the size
    of its torch file."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(v) for v in value)
    return 0
