"""Noise schedules: sigma(t) = total noise, alpha(t) = exp(-sigma(t)) = P(token still clean)."""

from __future__ import annotations

import torch
from torch import Tensor


class LogLinearSchedule:
    """MDLM's log-linear schedule: mask probability 1 - alpha(t) = (1 - eps) t.

    sigma(t) = -log(1 - (1 - eps) t),  dsigma/dt = (1 - eps) / (1 - (1 - eps) t).
    """

    def __init__(self, eps: float = 1e-3) -> None:
        if not 0.0 <= eps < 1.0:
            raise ValueError(f"schedule eps must be in [0, 1), got {eps}")
        self.eps = eps

    def sigma(self, t: Tensor) -> Tensor:
        return -torch.log1p(-(1 - self.eps) * t)

    def dsigma(self, t: Tensor) -> Tensor:
        return (1 - self.eps) / (1 - (1 - self.eps) * t)

    def mask_probability(self, t: Tensor) -> Tensor:
        """1 - alpha(t) = -expm1(-sigma(t)); exact for this schedule."""
        return (1 - self.eps) * t


SCHEDULES = {"loglinear": LogLinearSchedule}


def build_schedule(name: str, eps: float) -> LogLinearSchedule:
    if name not in SCHEDULES:
        raise ValueError(f"unknown noise schedule {name!r}; known: {', '.join(SCHEDULES)}")
    return SCHEDULES[name](eps=eps)
