"""Training checkpoint files (.ckpt): crash-safe writes, and telling a loadable checkpoint from a
damaged one.

Every checkpoint ``genodiff train`` and ``genodiff finetune`` write goes through
``AtomicCheckpointIO`` (a Lightning ``CheckpointIO`` plugin): the file is written beside its
target under a hidden temporary name, flushed to disk, then renamed over the target
(``genodiff.atomic_files``), so a ``kill -9`` at any moment leaves either the
previous file or the new one, never a truncated one; a full disk is one clear error and
keeps the previous file too.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from genodiff.atomic_files import atomic_write
from genodiff.errors import InputValueError

# Training checkpoints' record of the run so far: {"tokens_seen": int, "data_digest": str|None}.
RUN_STATE_KEY = "genodiff_run"
# What a guidance classifier's checkpoint (``genodiff classifier``) holds besides its weights
# (``genodiff.classifiers.checkpoint``); a generator's checkpoint has no such entry.
CLASSIFIER_RECORD_KEY = "genodiff_classifier"

NOT_A_TRAINING_CHECKPOINT = (
    "is not a genodiff training checkpoint (no hyper_parameters.config); a backbone checkpoint "
    "goes to init_from= / pretrained= / load_pretrained"
)


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """What a ``genodiff train`` checkpoint holds, read with ``weights_only`` (tensors and plain
    containers, never code: files may come from the Hub). Every command reads .ckpt files
    through here, so a file that is empty, truncated, corrupt, damaged after it was written
    (``verify_archive``), not a torch file, or a torch file without a genodiff run's config
    gives one ValueError naming it."""
    checkpoint = read_checkpoint_file(path, map_location)
    hyper = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    if not isinstance(hyper, dict) or "config" not in hyper or "state_dict" not in checkpoint:
        raise InputValueError(f"{path} {NOT_A_TRAINING_CHECKPOINT}")
    return checkpoint


def read_checkpoint_file(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """The object a torch checkpoint file holds, read with ``weights_only``; one ValueError
    naming the file when it is empty, truncated, corrupt, damaged or not a torch file."""
    path = Path(path)
    try:
        verify_archive(path)
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError, MemoryError, DamagedFileError):
        raise
    except Exception as err:  # noqa: BLE001 (torch raises many kinds for a damaged file)
        if isinstance(err, torch.OutOfMemoryError):
            raise
        empty = path.is_file() and path.stat().st_size == 0
        detail = "the file is empty" if empty else _first_sentence(err)
        raise InputValueError(
            f"{path} is not a loadable genodiff checkpoint (truncated or corrupt? {detail}); "
            "use another checkpoint, e.g. the run's last.ckpt, or copy it again"
        ) from None
    return checkpoint


def _first_sentence(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if text.isdigit():  # torch's legacy loader raises KeyError(<a byte>) for a non-torch file
        return "not a torch file"
    return text.split(". ")[0][:160]


class DamagedFileError(InputValueError):
    """A file whose bytes changed after it was written (a checksum it holds does not match)."""


def verify_archive(path: Path) -> None:
    """DamagedFileError when ``path`` is a zip archive (torch's format) whose bytes changed
    after it was written: the CRC-32 of a member does not match. torch.load does not check
    them, so a flipped byte inside a tensor would otherwise load as a slightly different
    model. A file that is not a zip archive is left to torch.load to judge."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError):
        return  # not a zip archive (or torch's legacy format): torch.load says what is wrong
    if damaged is not None:
        raise DamagedFileError(
            f"{path} is damaged: its bytes changed after it was written (the checksum of "
            f"{damaged} does not match); use another checkpoint, e.g. the previous one, or "
            "copy it again"
        )


def is_loadable(path: Path) -> bool:
    """Whether ``path`` is a complete training checkpoint: an intact torch file (every
    member's CRC checked, ``verify_archive``) that unpickles to a dict with ``state_dict`` and
    ``global_step``."""
    try:
        verify_archive(path)
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # any failure to read it means it cannot be resumed from
        return False
    return isinstance(checkpoint, dict) and {"state_dict", "global_step"} <= checkpoint.keys()


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO with atomic, fsynced writes (``atomic_write``)."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        # On a full disk: a DiskFullError naming the file; the previous one is kept.
        with atomic_write(path, "wb", expected_bytes=tensor_bytes(checkpoint)) as handle:
            torch.save(checkpoint, handle)


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
