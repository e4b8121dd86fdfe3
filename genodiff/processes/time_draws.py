"""The training times of the diffusion objectives (masked and uniform noise alike)."""

from __future__ import annotations

import torch
from torch import Tensor


def sample_times(
    n: int,
    device: torch.device,
    generator: torch.Generator | None,
    low_discrepancy: bool,
    num_steps: int,
    sampling_eps: float,
) -> Tensor:
    """(n,) times. Low-discrepancy: u_i = (U + i / n) mod 1 (one U per batch), else iid.

    Continuous time (``num_steps`` = 0): t = (1 - sampling_eps) u + sampling_eps in
    [sampling_eps, 1]. Discrete time: t = (floor(u T) + 1) / T on {1/T, ..., 1}.
    """
    if low_discrepancy:
        u0 = torch.rand(1, device=device, generator=generator)
        u = (u0 + torch.arange(n, device=device) / n) % 1.0  # (n,)
    else:
        u = torch.rand(n, device=device, generator=generator)
    if num_steps:
        steps = torch.floor(u * num_steps).clamp_max(num_steps - 1)
        return (steps + 1) / num_steps
    return (1 - sampling_eps) * u + sampling_eps
