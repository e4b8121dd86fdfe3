"""Depthwise causal 1-D convolution with the semantics of the ``causal_conv1d`` package: the full
sequence (``causal_conv1d_fn``) and one recurrent step (``causal_conv1d_update``).

The upstream kernels (widths 2 to 4) run where ``genodiff.ops.upstream`` sends a call; else, for
CUDA tensors that need no gradient (sampling, evaluation), genodiff's Triton kernel
(``genodiff.ops.conv_triton``); otherwise the exact PyTorch code below.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genodiff.ops.upstream import (
    CAUSAL_CONV1D,
    CAUSAL_CONV1D_UPDATE,
    TRITON_CAUSAL_CONV1D,
    triton_kernel,
    upstream,
)

ACTIVATIONS = (None, "silu", "swish")


def _check_activation(activation: str | None) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None, 'silu' or 'swish', got {activation!r}")


def causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """out[:, d, t] = act(bias[d] + sum_k weight[d, k] x[:, d, t - K + 1 + k]), zeros before t=0.

    x: (B, D, L); weight: (D, K); bias: (D,); activation: None, "silu" or "swish". Computed in
    weight's dtype (in float32 by the kernels), returned in x's (as upstream: bf16 x with a
    float32 weight is fine).
    """
    _check_activation(activation)
    K = weight.shape[1]
    if 2 <= K <= 4 and (kernel := upstream(CAUSAL_CONV1D, x)) is not None:
        return kernel(x, weight, bias, activation=activation)
    if (kernel := triton_kernel(TRITON_CAUSAL_CONV1D, x, weight, bias)) is not None:
        return kernel(x, weight, bias, silu=activation is not None)
    padded = F.pad(x, (K - 1, 0)).to(weight.dtype)
    out = F.conv1d(padded, weight.unsqueeze(1), bias, groups=x.shape[1])  # (B, D, L)
    return (F.silu(out) if activation is not None else out).to(x.dtype)


def causal_conv1d_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """One step of ``causal_conv1d``: x (B, D) is the newest input; conv_state (B, D, K) holds
    the last K inputs and is shifted in place to end with x. Returns (B, D) in x's dtype.

    conv_state must have x's dtype (as the upstream kernel requires); weight: (D, K).
    """
    _check_activation(activation)
    K = weight.shape[1]
    if 2 <= K <= 4 and (kernel := upstream(CAUSAL_CONV1D_UPDATE, x)) is not None:
        return kernel(x, conv_state, weight, bias, activation)
    conv_state.copy_(conv_state.roll(-1, dims=-1))  # drop the oldest input
    conv_state[:, :, -1] = x
    out = (conv_state * weight).sum(-1)  # (B, D)
    if bias is not None:
        out = out + bias
    return (F.silu(out) if activation is not None else out).to(x.dtype)
