"""Stand-in for ``mamba_ssm.ops.triton.layer_norm``: the fused add + LayerNorm / RMSNorm.

Rules of the Triton kernel and its wrapper (``LayerNormFn`` / ``_layer_norm_fwd``):
- x is flattened to (M, N); residual must have x's shape; weight (and bias) shape (N,);
- one row must fit the kernel's block: N * x.element_size() <= 65536 (RuntimeError otherwise);
- x + residual is summed and normalised in float32; the normed output has x's dtype;
- the residual out has residual's dtype when a residual is given, else float32 with
  residual_in_fp32, else x's dtype (then it is x itself); prenorm returns (out, residual_out),
  otherwise out alone.
Dropout, rowscale and the parallel (x1 / weight1) form are not modelled.
"""

from __future__ import annotations

import torch

from tests.fakes._contract import calls, not_modelled, require, same_device, shape


def layer_norm_fn(
    x, weight, bias, residual=None, x1=None, weight1=None, bias1=None, eps=1e-6, dropout_p=0.0,
    rowscale=None, prenorm=False, residual_in_fp32=False, is_rms_norm=False,
    return_dropout_mask=False,
):  # fmt: skip
    calls["layer_norm_fn"] += 1
    not_modelled(x1 is not None or weight1 is not None or bias1 is not None, "parallel norms")
    not_modelled(dropout_p > 0.0 or return_dropout_mask or rowscale is not None, "dropout")
    width = x.shape[-1]
    if residual is not None:
        shape(residual, tuple(x.shape), "residual")
    shape(weight, (width,), "weight")
    if bias is not None:
        shape(bias, (width,), "bias")
    same_device(x, weight=weight, bias=bias, residual=residual)
    block = min(65536 // x.element_size(), 1 << (width - 1).bit_length())
    require(width <= block, "This layer norm doesn't support feature dim >= 64KB.")

    residual_dtype = (
        residual.dtype if residual is not None else (torch.float32 if residual_in_fp32 else None)
    )
    with torch.autocast(x.device.type, enabled=False):
        s = x.float() if residual is None else x.float() + residual.float()
        if is_rms_norm:
            normed = s * torch.rsqrt(s.square().mean(-1, keepdim=True) + eps)
        else:
            centred = s - s.mean(-1, keepdim=True)
            normed = centred * torch.rsqrt(centred.square().mean(-1, keepdim=True) + eps)
        out = normed * weight.float() + (bias.float() if bias is not None else 0)
    out = out.to(x.dtype)
    if residual is None and residual_dtype in (None, x.dtype):
        residual_out = x
    else:
        residual_out = s.to(residual_dtype or x.dtype)
    return (out, residual_out) if prenorm else out
