"""Samplers for absorbing-state (masked) diffusion models: MDLM and D3PM.

``MASKED_SAMPLERS`` maps the names a user may ask for (``SampleRequest.sampler``,
``genodiff sample --sampler``) to the functions; the first is the default.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from genodiff.samplers.first_hitting import first_hitting
from genodiff.samplers.masked import MaskedDiffusion, ancestral, cached
from genodiff.samplers.semi_ar import semi_autoregressive
from genodiff.sampling import SampleRequest

MASKED_SAMPLERS: dict[str, Callable[..., Tensor]] = {
    "ancestral": ancestral,
    "cached": cached,
    "first-hitting": first_hitting,
    "semi-ar": semi_autoregressive,
}


def sample_masked(
    objective: MaskedDiffusion,
    model: nn.Module,
    request: SampleRequest,
    generator: torch.Generator | None,
) -> Tensor:
    """Run the sampler ``request.sampler`` names (the objective validates the name)."""
    sampler = MASKED_SAMPLERS[objective.sampler_name(request)]
    return sampler(objective, model, request, generator)


__all__ = ["MASKED_SAMPLERS", "sample_masked"]
