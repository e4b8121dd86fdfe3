"""Crash-safe checkpoint files: atomic writes, and telling a loadable checkpoint from a damaged one.

Every checkpoint ``genodiff train`` writes goes through ``AtomicCheckpointIO`` (a Lightning
``CheckpointIO`` plugin): the file is written beside its target under a hidden temporary name,
flushed to disk, then renamed over the target, so a ``kill -9`` at any moment leaves either the
previous file or the new one, never a truncated one.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from genodiff.errors import InputValueError

TEMPORARY_SUFFIX = ".tmp"


def temporary_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: a hidden file beside it."""
    return path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")


def write_atomically(checkpoint: dict[str, Any], path: Path) -> None:
    """``torch.save(checkpoint)`` into ``path`` through a temporary file, fsync and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_path(path)
    try:
        with open(temporary, "wb") as handle:
            torch.save(checkpoint, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself reaches the disk
    finally:
        os.close(folder)


def remove_temporary_files(folder: Path) -> None:
    """Delete what a killed writer left in ``folder`` (call it while holding the run's lock)."""
    for leftover in folder.glob(f".*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)


NOT_A_TRAINING_CHECKPOINT = (
    "is not a genodiff training checkpoint (no hyper_parameters.config); a backbone checkpoint "
    "goes to init_from= / pretrained= / load_pretrained"
)


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """What a ``genodiff train`` checkpoint holds, read with ``weights_only`` (tensors and plain
    containers, never code: files may come from the Hub). Every command reads .ckpt files
    through here, so a file that is empty, truncated, corrupt, not a torch file, or a torch
    file without a genodiff run's config gives one ValueError naming it."""
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError, MemoryError):
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
    hyper = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    if not isinstance(hyper, dict) or "config" not in hyper or "state_dict" not in checkpoint:
        raise InputValueError(f"{path} {NOT_A_TRAINING_CHECKPOINT}")
    return checkpoint


def _first_sentence(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if text.isdigit():  # torch's legacy loader raises KeyError(<a byte>) for a non-torch file
        return "not a torch file"
    return text.split(". ")[0][:160]


def is_loadable(path: Path) -> bool:
    """Whether ``path`` is a complete training checkpoint: an intact torch zip (every member's
    CRC checked) that unpickles to a dict with ``state_dict`` and ``global_step``."""
    try:
        with zipfile.ZipFile(path) as archive:
            if archive.testzip() is not None:
                return False
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # any failure to read it means it cannot be resumed from
        return False
    return isinstance(checkpoint, dict) and {"state_dict", "global_step"} <= checkpoint.keys()


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO with atomic, fsynced writes (``write_atomically``)."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        write_atomically(checkpoint, Path(path))
