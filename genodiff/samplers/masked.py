"""Samplers for masked diffusion: from all-[MASK] (except user-given positions) to DNA.

They need from the objective only: ``mask_id``, ``sampling_eps``, ``schedule`` (with
``mask_probability(t)``) and ``x0_log_probs(model, x_t, t)`` -> (n, L, V) log p(x0 | x_t).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from genodiff.sampling import SampleRequest, sample_categorical, sharpen


def ancestral(
    objective, model: nn.Module, request: SampleRequest, generator: torch.Generator | None
) -> Tensor:
    """``request.steps`` uniform steps in t from 1 to sampling_eps; between t and s a masked
    token unmasks with probability (p_t - p_s) / p_t (p = mask probability), its value drawn
    from x_theta; then a final noise-removal step (argmax at t = sampling_eps)."""
    device = next(model.parameters()).device
    n = request.num_samples
    x, _ = request.canvas(objective.mask_id, device)  # (n, L)
    times = torch.linspace(1.0, objective.sampling_eps, request.steps + 1, dtype=torch.float64)
    for t, s in zip(times[:-1], times[1:], strict=True):
        masked = x == objective.mask_id  # (n, L)
        if not masked.any():
            break
        log_p = objective.x0_log_probs(model, x, t.expand(n).to(device))  # (n, L, V)
        p_x0 = sharpen(log_p, request.temperature, request.top_p)
        p_t, p_s = objective.schedule.mask_probability(t), objective.schedule.mask_probability(s)
        q = p_x0 * (p_t - p_s)  # (n, L, V): unmask to x0 w.p. (p_t - p_s)/p_t, else stay masked
        q[..., objective.mask_id] = p_s
        x = torch.where(masked, sample_categorical(q, generator), x)
    return denoise_remaining(objective, model, x)


def denoise_remaining(objective, model: nn.Module, x: Tensor) -> Tensor:
    """Final noise-removal step: any token still masked takes the argmax of x_theta at t=eps."""
    masked = x == objective.mask_id
    if masked.any():
        t_final = torch.full((x.shape[0],), objective.sampling_eps, device=x.device)
        x = torch.where(masked, objective.x0_log_probs(model, x, t_final).argmax(-1), x)
    return x


MASKED_SAMPLERS: dict[str, Callable[..., Tensor]] = {"ancestral": ancestral}


def sample_masked(
    objective, model: nn.Module, request: SampleRequest, generator: torch.Generator | None
) -> Tensor:
    """Run the sampler ``request.sampler`` names."""
    sampler = MASKED_SAMPLERS[objective.sampler_name(request)]
    return sampler(objective, model, request, generator)
