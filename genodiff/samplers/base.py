"""One entry of an objective's sampler table: how to draw, and what it needs of the network.

Every objective lists its samplers in one table, ``Objective.samplers`` ``{name: Sampler}``
(the first entry is the default); ``Objective.sample`` looks the requested name up there and
calls the entry with the objective and the network. A sampler uses only what its objective
offers (e.g. masked-diffusion samplers: ``objective.process`` and ``x0_log_probs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from genodiff.samplers.noise import Noise, as_noise
from genodiff.samplers.request import SampleRequest


class Draw(Protocol):
    """(objective, model, request, noise) -> (request.num_samples, request.length) ids;
    positions where ``request.given`` is True hold ``request.template``. Every random number
    comes from ``noise`` (``genodiff.samplers.noise``), row by row."""

    def __call__(
        self,
        objective: Any,
        model: nn.Module,
        request: SampleRequest,
        noise: Noise,
    ) -> Tensor: ...


@dataclass(frozen=True)
class Sampler:
    """A sampling algorithm as an objective offers it.

    ``reuses_predictions``: the sampler keeps a network output across time steps while the
    sequence is unchanged, so it cannot serve a time-conditioned network (whose output changes
    with t at every step); ``Objective.sampler_name`` refuses that pairing before any sampling.
    ``takes_steps``: the sampler follows ``SampleRequest.steps`` (a time grid); False for one
    that sets its own number of network calls (first-hitting, left-to-right AR), whose samples
    then record no steps.
    ``guided``: the sampler draws a chosen class (``SampleRequest.guidance``, a
    ``genodiff.guidance.Guidance``); a guided request is refused by any other.
    """

    draw: Draw
    reuses_predictions: bool = False
    takes_steps: bool = True
    guided: bool = False

    def __call__(
        self,
        objective: Any,
        model: nn.Module,
        request: SampleRequest,
        noise: Noise | torch.Generator | None,
    ) -> Tensor:
        """Draw with ``noise``: a ``Noise`` (per-sequence streams), or one generator for the
        whole batch (None: torch's global one)."""
        device = next(model.parameters()).device
        return self.draw(objective, model, request, as_noise(noise, device))
