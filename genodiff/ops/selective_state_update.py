"""One recurrent step of the selective scan, with the semantics of mamba_ssm's Triton
``selective_state_update`` (used where ``genodiff.ops.upstream`` sends a call)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genodiff.ops.upstream import SELECTIVE_STATE_UPDATE, upstream


def selective_state_update(
    state: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
) -> torch.Tensor:
    """h <- exp(dt A) h + dt B x in place; returns y = (<C, h> + D x) (* silu(z)) in x's dtype.

    state: (B, D, N), updated in place (kept in its dtype); x, dt, z: (B, D); A: (D, N);
    B, C: (B, N); D, dt_bias: (D,). dt <- softplus(dt + dt_bias) when dt_softplus (linear past
    20). Computed in float32 (float64 for float64 x), as the kernel.
    """
    if (kernel := upstream(SELECTIVE_STATE_UPDATE, x)) is not None:
        return kernel(state, x, dt, A, B, C, D, z=z, dt_bias=dt_bias, dt_softplus=dt_softplus)
    ftype = torch.promote_types(x.dtype, torch.float32)
    dt = dt.to(ftype) + (dt_bias.to(ftype) if dt_bias is not None else 0)
    if dt_softplus:
        dt = F.softplus(dt)  # torch's softplus is linear past 20, as the kernel's
    xf = x.to(ftype)
    h = state.to(ftype) * torch.exp(dt.unsqueeze(-1) * A.to(ftype))  # (B, D, N)
    h = h + (dt * xf).unsqueeze(-1) * B.to(ftype).unsqueeze(1)
    state.copy_(h)
    y = (h * C.to(ftype).unsqueeze(1)).sum(-1)  # (B, D)
    if D is not None:
        y = y + D.to(ftype) * xf
    if z is not None:
        y = y * F.silu(z.to(ftype))
    return y.to(x.dtype)
