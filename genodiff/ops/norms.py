"""RMSNorm and the prenorm "add -> norm" step of Mamba blocks."""

from __future__ import annotations

import torch
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dim, computed in float32."""
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * weight.float()).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def add_norm(
    x: torch.Tensor, residual: torch.Tensor | None, norm: nn.Module, residual_in_fp32: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """residual <- x + residual (x alone when None); returns (norm(residual), residual).

    The residual is kept in float32 when residual_in_fp32, and normalised in the norm's dtype,
    like mamba_ssm's (fused or not) ``Block``.
    """
    residual = x if residual is None else x + residual
    normed = norm(residual.to(norm.weight.dtype))
    return normed, residual.float() if residual_in_fp32 else residual
