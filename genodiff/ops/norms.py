"""RMSNorm and the prenorm "add -> norm" step of Mamba blocks."""

from __future__ import annotations

import torch
from torch import nn

from genodiff.ops.upstream import LAYER_NORM, upstream


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
    x: torch.Tensor,
    residual: torch.Tensor | None,
    norm: nn.Module,
    residual_in_fp32: bool,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """residual <- x + residual (x alone when None); returns (norm(residual), residual).

    The residual is kept in float32 when residual_in_fp32, like mamba_ssm's ``Block``. With
    ``fused`` (its fused_add_norm=True) an RMSNorm or LayerNorm runs as mamba_ssm's fused
    add + norm kernel (Triton ``layer_norm_fn``, prenorm) where ``genodiff.ops.upstream``
    sends the call: the same function, except that, as that kernel, it normalises the float32
    sum before any rounding, returns the normed states in x's dtype and keeps a given residual
    in its own dtype. Otherwise the sum is normalised in the norm's dtype.
    """
    if (
        fused
        and isinstance(norm, (RMSNorm, nn.LayerNorm))
        and (kernel := upstream(LAYER_NORM, x)) is not None
    ):
        return kernel(
            x,
            norm.weight,
            getattr(norm, "bias", None),
            residual=residual,
            eps=norm.eps,
            prenorm=True,
            residual_in_fp32=residual_in_fp32,
            is_rms_norm=isinstance(norm, RMSNorm),
        )
    residual = x if residual is None else x + residual
    normed = norm(residual.to(norm.weight.dtype))
    return normed, residual.float() if residual_in_fp32 else residual
