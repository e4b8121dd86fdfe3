"""The interface every objective implements; an objective never knows which backbone it drives."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor, nn


class Objective(Protocol):
    def loss(
        self, model: nn.Module, input_ids: Tensor, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """(sum of per-token NELBO in nats over the batch, number of scored tokens)."""
        ...

    def sample(
        self,
        model: nn.Module,
        num_samples: int,
        length: int,
        steps: int,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """(num_samples, length) token ids drawn from the model."""
        ...
