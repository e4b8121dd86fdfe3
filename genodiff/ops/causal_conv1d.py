"""Depthwise causal 1-D convolution with the semantics of ``causal_conv1d.causal_conv1d_fn``."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F


@functools.cache
def _upstream_causal_conv1d() -> Callable | None:
    try:
        from causal_conv1d import causal_conv1d_fn
    except (ImportError, OSError):  # not installed, or installed without its CUDA extension
        return None
    return causal_conv1d_fn


def causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """out[:, d, t] = act(bias[d] + sum_k weight[d, k] x[:, d, t - K + 1 + k]), zeros before t=0.

    x: (B, D, L); weight: (D, K); bias: (D,); activation: None, "silu" or "swish".
    """
    if activation not in (None, "silu", "swish"):
        raise ValueError(f"activation must be None, 'silu' or 'swish', got {activation!r}")
    K = weight.shape[1]
    if x.is_cuda and 2 <= K <= 4 and (upstream := _upstream_causal_conv1d()) is not None:
        return upstream(x, weight, bias, activation=activation)
    out = F.conv1d(F.pad(x, (K - 1, 0)), weight.unsqueeze(1), bias, groups=x.shape[1])  # (B, D, L)
    return F.silu(out) if activation is not None else out
