"""Categorical sampling in float64 (float32 Gumbel noise truncates tails, lowering diversity)."""

from __future__ import annotations

import torch
from torch import Tensor


def sample_categorical(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Draw one category per row of ``probs`` (..., V) by inverting the float64 CDF.

    Rows need not be normalised; zero-probability categories are never drawn.
    """
    cdf = probs.to(torch.float64).cumsum(dim=-1)  # (..., V)
    u = torch.rand(
        (*cdf.shape[:-1], 1), dtype=torch.float64, device=cdf.device, generator=generator
    )
    draws = torch.searchsorted(cdf, u * cdf[..., -1:], right=True)  # (..., 1)
    return draws.squeeze(-1).clamp_max(cdf.shape[-1] - 1)
