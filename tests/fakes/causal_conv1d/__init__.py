"""Stand-in for ``causal_conv1d``: ``causal_conv1d_fn`` and ``causal_conv1d_update``.

Preconditions of the CUDA kernels (csrc/causal_conv1d.cpp), after what the Python wrappers fix:
- x in float32 / float16 / bfloat16, shape (batch, dim, seqlen); weight in one of those dtypes,
  shape exactly (dim, width) (a Conv1d weight (dim, 1, width) is rejected) with
  2 <= width <= 4; bias in weight's dtype, shape (dim,), stride 1;
- x with stride 1 over seqlen, or channel-last (stride 1 over dim), which needs dim % 8 == 0
  and x.stride(0), x.stride(2) multiples of 8 (the wrapper copies x when neither holds);
- the update: conv_state in x's dtype, shape (batch, dim, state_len), state_len >= width - 1;
- activation None / "silu" / "swish" (NotImplementedError otherwise, as upstream).
Results are computed in float32 and returned in x's dtype, as the kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.fakes._contract import KERNEL_DTYPES, calls, not_modelled, require, same_device, shape


def _check_activation(activation: str | None) -> bool:
    """-> whether SiLU is applied."""
    if activation not in (None, "silu", "swish"):
        raise NotImplementedError("activation must be None, silu, or swish")
    return activation is not None


def _check(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    require(x.dtype in KERNEL_DTYPES, f"x dtype {x.dtype} not supported")
    require(weight.dtype in KERNEL_DTYPES, f"weight dtype {weight.dtype} not supported")
    require(x.dim() == 3, "x must be (batch, dim, seqlen)")
    dim, width = x.shape[1], weight.shape[-1]
    shape(weight, (dim, width), "weight")
    require(2 <= width <= 4, "causal_conv1d only supports width between 2 and 4")
    same_device(x, weight=weight, bias=bias)
    if bias is not None:
        require(bias.dtype == weight.dtype, "bias must have weight's dtype")
        require(bias.stride(-1) == 1, "bias must have stride 1")
        shape(bias, (dim,), "bias")


def _windowed(
    x_ext: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    silu: bool,
    seqlen: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """out[..., t] = act(bias + sum_k weight[:, k] x_ext[..., t + k]) over the last ``seqlen``
    windows of x_ext (batch, dim, T), in float32; -> (batch, dim, seqlen) in ``dtype``."""
    with torch.autocast(x_ext.device.type, enabled=False):
        windows = x_ext.float().unfold(-1, weight.shape[1], 1)[:, :, -seqlen:]  # (b, d, l, w)
        out = (windows * weight.float().unsqueeze(1)).sum(-1)  # (b, d, l)
        if bias is not None:
            out = out + bias.float().unsqueeze(-1)
        return (F.silu(out) if silu else out).to(dtype)


def causal_conv1d_fwd_function(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, silu: bool
) -> torch.Tensor:
    """The forward kernel itself (what mamba_inner_fn calls): checks, then the convolution."""
    _check(x, weight, bias)
    require(x.stride(2) == 1 or x.stride(1) == 1, "x needs stride 1 over seqlen or over dim")
    if x.stride(1) == 1 and x.stride(2) > 1:  # channel-last layout
        require(x.shape[1] % 8 == 0, "channel-last causal_conv1d needs dim % 8 == 0")
        require(x.stride(0) % 8 == 0 and x.stride(2) % 8 == 0, "channel-last strides % 8")
    width = weight.shape[1]
    return _windowed(F.pad(x, (width - 1, 0)), weight, bias, silu, x.shape[-1], x.dtype)


def causal_conv1d_fn(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    seq_idx: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    return_final_states: bool = False,
    final_states_out: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """x (batch, dim, seqlen), weight (dim, width), bias (dim,) -> (batch, dim, seqlen)."""
    calls["causal_conv1d_fn"] += 1
    silu = _check_activation(activation)
    not_modelled(seq_idx is not None, "seq_idx")
    not_modelled(initial_states is not None or return_final_states, "initial / final states")
    if x.stride(2) != 1 and x.stride(1) != 1:
        x = x.contiguous()
    return causal_conv1d_fwd_function(
        x, weight, bias.contiguous() if bias is not None else None, silu
    )


def causal_conv1d_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    cache_seqlens: torch.Tensor | None = None,
    conv_state_indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """x (batch, dim) or (batch, dim, seqlen) appended to conv_state (batch, dim, state_len),
    which is updated in place; -> the convolution at the new positions, x's shape and dtype."""
    calls["causal_conv1d_update"] += 1
    silu = _check_activation(activation)
    not_modelled(cache_seqlens is not None or conv_state_indices is not None, "circular states")
    squeeze = x.dim() == 2
    x3 = x.unsqueeze(-1) if squeeze else x
    _check(x3, weight, bias)
    require(conv_state.dtype == x.dtype, "conv_state must have x's dtype")
    same_device(x, conv_state=conv_state)
    batch, dim, seqlen = x3.shape
    require(conv_state.dim() == 3, "conv_state must be (batch, dim, state_len)")
    state_len = conv_state.shape[-1]
    shape(conv_state, (batch, dim, state_len), "conv_state")
    require(state_len >= weight.shape[1] - 1, "conv_state shorter than width - 1")
    x_ext = torch.cat([conv_state, x3], dim=-1)  # (batch, dim, state_len + seqlen)
    conv_state.copy_(x_ext[:, :, -state_len:])
    out = _windowed(x_ext, weight, bias, silu, seqlen, x.dtype)
    return out.squeeze(-1) if squeeze else out
