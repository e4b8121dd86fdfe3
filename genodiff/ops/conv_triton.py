"""The depthwise causal convolution (``causal_conv1d``'s semantics) as a Triton kernel: the
sampler's short convolution on a GPU without the causal-conv1d package.

Without causal-conv1d, PyTorch ran each mixer direction's convolution as a padded copy, a
grouped ``conv1d`` and a SiLU: 11-17% of a 64-row sampling step on an H200 (BENCHMARKS.md,
"GPU sampler"), for a pass that only reads x once and writes the output once. This kernel does
that pass: one program a (batch, channel) row and block of positions, the K taps summed in
float32 from x read in place (any strides: x is a channel slice of the in_proj output), the
bias and SiLU applied before the one store. Forward only: training keeps PyTorch's autograd
(``genodiff.ops.causal_conv1d`` routes a call here only when no gradient is asked for).

Triton comes with PyTorch's CUDA builds; this module is imported only for a CUDA call, so a
machine without triton never imports it. Under ``TRITON_INTERPRET=1`` (set before the import)
the same kernel runs on CPU tensors in Triton's interpreter: tests/test_conv_triton.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_BLOCK = 1024  # positions a program computes, at most
FP_FUSION = True  # a * b + c as one fused multiply-add in the kernel (Triton's compile option)


@triton.jit
def _causal_conv1d_kernel(
    x_ptr,
    weight_ptr,
    bias_ptr,
    out_ptr,
    channels,
    length,
    stride_xb,
    stride_xd,
    stride_xl,
    stride_wd,
    stride_wk,
    K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SILU: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)  # batch * channels + channel
    batch, channel = row // channels, row % channels
    t = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) output positions
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + channel).to(tl.float32)
    x_row = x_ptr + batch * stride_xb + channel * stride_xd
    for k in tl.static_range(K):  # out[t] += weight[k] x[t - K + 1 + k], zeros before t = 0
        source = t - (K - 1) + k
        inside = (source >= 0) & (source < length)
        x = tl.load(x_row + source * stride_xl, mask=inside, other=0.0).to(tl.float32)
        acc += x * tl.load(weight_ptr + channel * stride_wd + k * stride_wk).to(tl.float32)
    if SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(out_ptr + row * length + t, acc.to(out_ptr.dtype.element_ty), mask=t < length)


def causal_conv1d_triton(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, silu: bool
) -> torch.Tensor:
    """act(bias[d] + sum_k weight[d, k] x[:, d, t - K + 1 + k]) as ``genodiff.ops.causal_conv1d``,
    summed in float32: x (B, D, L) with any strides, weight (D, K), bias (D,) or None ->
    (B, D, L) contiguous in x's dtype."""
    batch, channels, length = x.shape
    out = torch.empty(batch, channels, length, device=x.device, dtype=x.dtype)  # (B, D, L)
    if out.numel() == 0:
        return out
    block = min(MAX_BLOCK, max(16, triton.next_power_of_2(length)))
    grid = (batch * channels, triton.cdiv(length, block))
    _causal_conv1d_kernel[grid](
        x,
        weight,
        bias if bias is not None else weight,  # not read without HAS_BIAS
        out,
        channels,
        length,
        *x.stride(),
        *weight.stride(),
        K=weight.shape[1],
        HAS_BIAS=bias is not None,
        SILU=silu,
        BLOCK=block,
        # multiply-adds fused in the tap sum (one rounding per tap), named so that Triton 3.9+
        # does not warn each process that its default changes in 3.10
        enable_fp_fusion=FP_FUSION,
    )
    return out
