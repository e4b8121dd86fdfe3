"""The training times of the diffusion objectives (masked and uniform noise alike), and
importance-weighted times for a lower-variance held-out bound (UDLM)."""

from __future__ import annotations

import torch
from torch import Tensor

from genodiff.randomness.noise import Noise


def sample_times(
    n: int,
    noise: Noise,
    low_discrepancy: bool,
    num_steps: int,
    sampling_eps: float,
) -> Tensor:
    """(n,) times drawn from ``noise``. Low-discrepancy: ``Noise.stratified`` (one generator:
    u_i = (U + i / n) mod 1, one U per batch; per-window streams: stratified within each
    window's draws), else iid.

    Continuous time (``num_steps`` = 0): t = (1 - sampling_eps) u + sampling_eps in
    [sampling_eps, 1]. Discrete time: t = (floor(u T) + 1) / T on {1/T, ..., 1}.
    """
    t, _ = weighted_times(n, noise, low_discrepancy, num_steps, sampling_eps, 1.0)
    return t


def weighted_times(
    n: int,
    noise: Noise,
    low_discrepancy: bool,
    num_steps: int,
    sampling_eps: float,
    power: float,
) -> tuple[Tensor, Tensor]:
    """(n,) times and (n,) weights: u drawn as ``sample_times`` draws it, then s = u^power
    turned into t as ``sample_times`` turns u into t, with weight ds/du = power u^(power - 1).
    For any f, E[weight f(t)] equals ``sample_times``' E[f(t)] (substitute s = u^power), while
    the times crowd towards t = 0 (density of s proportional to s^(1/power - 1)): an estimate
    whose integrand is large and noisy at small t (UDLM's) gets a far smaller variance. With
    low discrepancy the u are stratified, so each of K draws of one window (``genodiff eval``,
    ``Noise.per_window``) keeps its own stratum. ``power`` = 1 is ``sample_times`` (weights 1,
    the same draws)."""
    if low_discrepancy:
        u = noise.stratified(n, torch.float32)  # (n,)
    else:
        u = noise.uniform(n, dtype=torch.float32)
    s, weight = u**power, power * u ** (power - 1)
    if num_steps:
        steps = torch.floor(s * num_steps).clamp_max(num_steps - 1)
        return (steps + 1) / num_steps, weight
    return (1 - sampling_eps) * s + sampling_eps, weight
