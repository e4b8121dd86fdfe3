"""Plaid's learned noise schedule gamma(t) = log(sigma_t^2 / alpha_t^2), in float64.

    g(t)     = sum_k softplus(w2_k) tanh(softplus(w1_k) (t - 1/2) + b_k)      (increasing in t)
    gamma(t) = gamma_0 + (gamma_1 - gamma_0) (g(t) - g(0)) / (g(1) - g(0))
    gamma'(t) = (gamma_1 - gamma_0) g'(t) / (g(1) - g(0)),
    g'(t)    = sum_k softplus(w2_k) softplus(w1_k) (1 - tanh^2(...))

Positive weights make g, hence gamma, monotone increasing whenever gamma_1 > gamma_0; the
normalisation pins gamma(0) = gamma_0 and gamma(1) = gamma_1 exactly, and both endpoints are
learnable parameters. Variance preserving: alpha^2 = sigmoid(-gamma), sigma^2 = sigmoid(gamma).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from genodiff.errors import InputValueError


class GammaAt(NamedTuple):
    """gamma(t) and gamma'(t) (float64, shape of t), and the normalised shape (g(t) - g(0)) /
    (g(1) - g(0)) with its derivative: the part that depends on the interior parameters."""

    gamma: Tensor
    dgamma: Tensor
    shape: Tensor
    dshape: Tensor


class LearnedGammaSchedule(nn.Module):
    """gamma(t) with learnable endpoints and a monotone interior of ``hidden`` (>= 1, declared
    by Plaid's ``schedule_hidden`` range) tanh units."""

    def __init__(self, gamma_0: float = -3.0, gamma_1: float = 6.0, hidden: int = 1024) -> None:
        if not gamma_0 < gamma_1:
            raise InputValueError(
                f"need gamma_0 < gamma_1 (noise grows with t), got {gamma_0}, {gamma_1}"
            )
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(hidden))
        self.b1 = nn.Parameter(torch.randn(hidden))
        self.w2 = nn.Parameter(torch.randn(hidden))
        self.gamma_0 = nn.Parameter(torch.tensor(float(gamma_0)))
        self.gamma_1 = nn.Parameter(torch.tensor(float(gamma_1)))
        for p in self.parameters():
            p._no_weight_decay = True

    @staticmethod
    def alpha_sigma2(gamma: Tensor) -> tuple[Tensor, Tensor]:
        """alpha = sqrt(sigmoid(-gamma)) and sigma^2 = sigmoid(gamma), float64."""
        return torch.sigmoid(-gamma).sqrt(), torch.sigmoid(gamma)

    def _g(self, t: Tensor) -> tuple[Tensor, Tensor]:
        """g(t) and g'(t) in float64, shape of ``t``."""
        w1, w2 = F.softplus(self.w1.double()), F.softplus(self.w2.double())  # (H,)
        h = torch.tanh((t.double()[..., None] - 0.5) * w1 + self.b1.double())  # (..., H)
        return (h * w2).sum(-1), ((1 - h.square()) * w1 * w2).sum(-1)

    def endpoints(self) -> tuple[Tensor, Tensor]:
        """(gamma_0, gamma_1) as float64 scalars."""
        return self.gamma_0.double(), self.gamma_1.double()

    def forward(self, t: Tensor) -> GammaAt:
        g_t, dg_t = self._g(t)
        g_ends, _ = self._g(torch.tensor([0.0, 1.0], dtype=torch.float64, device=t.device))
        span = g_ends[1] - g_ends[0]
        shape, dshape = (g_t - g_ends[0]) / span, dg_t / span
        gamma_0, gamma_1 = self.endpoints()
        return GammaAt(
            gamma_0 + (gamma_1 - gamma_0) * shape, (gamma_1 - gamma_0) * dshape, shape, dshape
        )
