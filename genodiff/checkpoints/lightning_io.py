"""Lightning's checkpoint IO for genodiff's runs: atomic writes, reads through the one reader.

Its own module so that loading a model (``genodiff.load``) imports no Lightning: only a run
that trains (``genodiff.training``, ``genodiff.finetuning``) builds this plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from genodiff.atomic_files import atomic_write
from genodiff.checkpoints.io import read_checkpoint_file, tensor_bytes


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO with atomic, fsynced writes (``atomic_write``) and
    reads through ``read_checkpoint_file``: Lightning's own reads (a resume's ``ckpt_path``,
    ``trainer.test`` / ``validate`` of a checkpoint) are CRC-checked and ``weights_only`` with
    the allow-list, whatever ``weights_only`` Lightning asks for, and refuse what genodiff's
    loaders refuse, in the same line. A checkpoint genodiff read already for its checks before
    a resume is handed over (``hand_over``), so that the file is read once."""

    def __init__(self) -> None:
        super().__init__()
        self._handed: dict[Path, dict[str, Any]] = {}

    def hand_over(self, path: str | Path, checkpoint: dict[str, Any]) -> None:
        """Lightning's next read of ``path`` takes ``checkpoint``, what ``read_checkpoint_file``
        read from it, instead of reading the file again (the checks and the resume then see the
        same bytes)."""
        self._handed[Path(path).resolve()] = checkpoint

    def load_checkpoint(
        self, path: str | Path, map_location: Any = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        """The checkpoint handed over for ``path``, else the file read by
        ``read_checkpoint_file``, tensors on the CPU (Lightning moves them to the model's
        device as it restores; ``map_location`` and ``weights_only`` are not taken)."""
        handed = self._handed.pop(Path(path).resolve(), None)
        return handed if handed is not None else read_checkpoint_file(path)

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        # On a full disk: a DiskFullError naming the file; the previous one is kept.
        with atomic_write(path, "wb", expected_bytes=tensor_bytes(checkpoint)) as handle:
            torch.save(checkpoint, handle)
