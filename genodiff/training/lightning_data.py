"""A genodiff data module handed to Lightning's Trainer (``fit`` and ``test`` take a
``LightningDataModule``).

``genodiff.data.base.DataModule`` is a plain class, so that loading a model, generating and
scoring import no Lightning; the runs that train (``genodiff train``, ``genodiff classifier``)
wrap their data module in ``LightningData``, which forwards what the Trainer calls (``setup``,
the loaders, ``state_dict`` / ``load_state_dict``) and gives the wrapped module the Trainer
Lightning attaches: its loaders split every global batch over the Trainer's processes and
record where training stands in the data.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from genodiff.data.base import DataModule


class LightningData(L.LightningDataModule):
    """``data`` as Lightning's Trainer reads a data module."""

    def __init__(self, data: DataModule) -> None:
        self.data = data  # before LightningDataModule.__init__, which sets ``trainer``
        super().__init__()

    @property
    def trainer(self) -> L.Trainer | None:
        """The Trainer reading the loaders: the wrapped module's (Lightning sets it here)."""
        return self.data.trainer

    @trainer.setter
    def trainer(self, trainer: L.Trainer | None) -> None:
        self.data.trainer = trainer

    def setup(self, stage: str) -> None:
        self.data.setup(stage)

    def train_dataloader(self) -> DataLoader:
        return self.data.train_dataloader()

    def val_dataloader(self) -> DataLoader:
        return self.data.val_dataloader()

    def test_dataloader(self) -> DataLoader:
        return self.data.test_dataloader()

    def state_dict(self) -> dict[str, Any]:
        return self.data.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.data.load_state_dict(state_dict)
