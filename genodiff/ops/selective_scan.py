"""The Mamba selective scan with the semantics of mamba_ssm's ``selective_scan_fn``.

CUDA tensors use the upstream kernel when ``mamba_ssm`` imports with its extension (the rule is
in ``genodiff.ops.upstream``). Everything else runs a custom autograd function with a
hand-written reverse-time backward: numba kernels on CPU (set ``GENODIFF_DISABLE_NUMBA=1`` to
skip them), a sequential PyTorch loop otherwise. Both accumulate in float32 (float64 for
float64 inputs) and never build (B, D, L, N) tensors. A call that needs no gradient
(``genodiff.ops.inference``) runs the forward kernel alone, outside autograd: it keeps one
(N,) state per row and saves nothing.

``mixer_conv`` and ``mixer_scan`` are the kernels of the one-pass inference mixer
(``genodiff.backbones.mamba.mix_directions``), with the same backends.
"""

from __future__ import annotations

import functools
import os
import warnings
from types import ModuleType

import torch
from torch.autograd.function import once_differentiable

from genodiff.ops import _scan_torch
from genodiff.ops.inference import inference_path
from genodiff.ops.upstream import SELECTIVE_SCAN, upstream

_numba_failed = False


@functools.cache
def _numba_kernels() -> ModuleType | None:
    try:
        from genodiff.ops import _scan_cpu
    except (ImportError, OSError):
        return None
    return _scan_cpu


def _run(name: str, *args):
    """Call kernel ``name`` ("forward", "backward", "mixer_conv", "mixer_scan") of the best
    backend for these tensors."""
    global _numba_failed
    use_numba = args[0].device.type == "cpu" and os.environ.get("GENODIFF_DISABLE_NUMBA") != "1"
    kernels = _numba_kernels() if use_numba and not _numba_failed else None
    if kernels is not None:
        try:
            return getattr(kernels, name)(*args)
        except kernels.NumbaError as err:
            warnings.warn(f"numba selective scan failed ({err}); using PyTorch", stacklevel=3)
            _numba_failed = True
    return getattr(_scan_torch, name)(*args)


def _kernel_layout(X: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """B or C -> (Bb, G, Lb, N): (D, N) -> (1, D, 1, N); (B, N, L) -> (B, 1, L, N);
    (B, G, N, L) -> (B, G, L, N)."""
    if X.dim() == 2:
        return X.to(dtype)[None, :, None, :].contiguous()
    if X.dim() == 3:
        X = X.unsqueeze(1)
    return X.to(dtype).transpose(2, 3).contiguous()


def _user_layout(dX: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    if X.dim() == 2:
        return dX[0, :, 0].to(X.dtype)
    dX = dX.transpose(2, 3)
    return (dX.squeeze(1) if X.dim() == 3 else dX).to(X.dtype)


def _kernel_args(u, delta, A, B, C, D, z, delta_bias):
    dtype = torch.float64 if u.dtype == torch.float64 else torch.float32
    n_channels = A.shape[0]

    def dense(x):
        return x.to(dtype).contiguous() if x is not None else None

    zeros = u.new_zeros(n_channels, dtype=dtype)
    return (
        dense(u),
        dense(delta),
        dense(A),
        _kernel_layout(B, dtype),
        _kernel_layout(C, dtype),
        dense(D) if D is not None else zeros,
        dense(z),
        dense(delta_bias) if delta_bias is not None else zeros,
    )


def _forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
    """The forward kernel alone: (out in u's dtype (B, D, L), last state (B, D, N))."""
    out, last = _run("forward", *_kernel_args(u, delta, A, B, C, D, z, delta_bias), delta_softplus)
    return out.to(u.dtype), last


class _SelectiveScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, delta, A, B, C, D, z, delta_bias, delta_softplus):
        out, last = _forward(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
        ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias)
        ctx.delta_softplus = delta_softplus
        ctx.mark_non_differentiable(last)
        return out, last

    @staticmethod
    @once_differentiable
    def backward(ctx, dout, _dlast):
        u, delta, A, B, C, D, z, delta_bias = ctx.saved_tensors
        args = _kernel_args(u, delta, A, B, C, D, z, delta_bias)
        dout = dout.to(args[0].dtype).contiguous()
        du, ddelta, dA, dB, dC, dD, dz, dbias = _run("backward", dout, *args, ctx.delta_softplus)
        return (
            du.to(u.dtype),
            ddelta.to(delta.dtype),
            dA.to(A.dtype),
            _user_layout(dB, B),
            _user_layout(dC, C),
            dD.to(D.dtype) if D is not None else None,
            dz.to(z.dtype) if z is not None else None,
            dbias.to(delta_bias.dtype) if delta_bias is not None else None,
            None,
        )


@functools.cache
def _drops_constant_b_from_state(kernel, device: torch.device) -> bool:
    """Whether ``kernel``'s last state lacks the factor B when B is constant (D, N).

    mamba_ssm's CUDA scan keeps a constant B out of its running state (it multiplies B into C
    for the output, which stays right), so the last state it returns is h_L / B: seen on an
    H200 with mamba-ssm 2.3.2.post1 (BENCHMARKS.md, "The CUDA kernels against the CPU path";
    upstream's open pull request 371 fixes it). One probe per kernel and device, rather than a
    version check, so that a fixed release is not corrected twice: one step with B = 2, u =
    delta = 1, where h_1 = 2 (or 1 without B)."""
    one = torch.ones(1, 1, 1, device=device)  # (batch, D, L)
    weight = torch.ones(1, 1, device=device)  # (D, N)
    _, last = kernel(one, one, -weight, 2 * weight, weight, None, None, None, False, True)
    return abs(float(last) - 1.0) < 0.5


def _check_shapes(u, delta, A, B, C, D, z, delta_bias) -> None:
    """ValueError, in one line, for arguments whose shapes do not fit together (the kernels
    index by them: a misfit read past the tensors' ends or mixed up rows)."""
    if u.dim() != 3 or A.dim() != 2 or A.shape[0] != u.shape[1]:
        raise ValueError(
            f"selective_scan: u {tuple(u.shape)} and A {tuple(A.shape)} must be (batch, D, L) "
            "and (D, N) with the same D"
        )
    (batch, channels, length), n_state = u.shape, A.shape[1]
    for name, x in (("delta", delta), ("z", z)):
        if x is not None and x.shape != u.shape:
            raise ValueError(
                f"selective_scan: {name} {tuple(x.shape)} must have u's shape {tuple(u.shape)}"
            )
    for name, x in (("D", D), ("delta_bias", delta_bias)):
        if x is not None and x.shape != (channels,):
            raise ValueError(
                f"selective_scan: {name} {tuple(x.shape)} must be ({channels},), one per channel"
            )
    for name, x in (("B", B), ("C", C)):
        if not _fits_b_or_c(x, batch, channels, n_state, length):
            raise ValueError(
                f"selective_scan: {name} {tuple(x.shape)} must be (batch, N, L) = "
                f"{(batch, n_state, length)}, (batch, G, N, L) with G dividing D = {channels}, "
                f"or constant (D, N) = {(channels, n_state)}"
            )


def _fits_b_or_c(x: torch.Tensor, batch: int, channels: int, n_state: int, length: int) -> bool:
    """Whether B or C is (D, N), (batch, N, L) or (batch, G, N, L) with G dividing D."""
    if x.dim() == 4:
        groups = x.shape[1]
        grouped = (batch, groups, n_state, length)
        return x.shape == grouped and groups > 0 and channels % groups == 0
    return x.shape in ((channels, n_state), (batch, n_state, length))


def selective_scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    return_last_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """y = selective scan of u (as ``mamba_ssm.ops.selective_scan_interface.selective_scan_fn``).

    u, delta, z: (B, D, L); A: (D, N) real; B, C: (B, N, L), grouped (B, G, N, L) (channel d uses
    group d // (D / G)), or constant (D, N); D, delta_bias: (D,). Shapes that do not fit
    together are a one-line ValueError (as upstream's shape checks).
    delta <- softplus(delta + delta_bias) if delta_softplus; h_t = exp(delta_t A) h_{t-1} +
    delta_t B_t u_t; y_t = <C_t, h_t> + D u_t; y *= silu(z). Returns y (B, D, L) in u's dtype,
    and with return_last_state also h_L (B, D, N) in float32 (float64 for float64 u), which
    carries no gradient (as upstream).
    """
    if A.is_complex():
        raise ValueError("selective_scan supports real A only")
    _check_shapes(u, delta, A, B, C, D, z, delta_bias)
    if (kernel := upstream(SELECTIVE_SCAN, u)) is not None:
        result = kernel(u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state)
        if return_last_state and B.dim() == 2 and _drops_constant_b_from_state(kernel, u.device):
            out, last = result
            return out, last * B.float()  # (batch, D, N) * (D, N)
        return result
    args = (u, delta, A, B, C, D, z, delta_bias, delta_softplus)
    out, last = _forward(*args) if inference_path(*args[:-1]) else _SelectiveScan.apply(*args)
    return (out, last) if return_last_state else out


def mixer_conv(
    xz: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """silu(depthwise conv) of S <= 2 directions: xz (B, L, P, 2 d_inner) in-projections
    (x = xz[..., :d_inner]; direction s reads projection min(s, P - 1)), weight (S, d_inner, K),
    bias (S, d_inner), all in one float dtype -> u (S, B, L, d_inner). Direction 0 is causal
    in t, direction 1 anti-causal: the causal conv of the flipped sequence, flipped back.
    ``out``: a contiguous tensor of u's shape to write u into (default: a new one)."""
    S, D, _ = weight.shape
    out = _output(out, xz, (S, xz.shape[0], xz.shape[1], D))
    return _run("mixer_conv", xz.contiguous(), weight, bias, out)


def mixer_scan(
    u: torch.Tensor,
    x_dbl: torch.Tensor,
    dt_weight: torch.Tensor,
    A: torch.Tensor,
    D: torch.Tensor,
    xz: torch.Tensor,
    delta_bias: torch.Tensor,
    summed: bool,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The selective scan of S <= 2 directions, time-major, no gradient, all in one float
    dtype: u (S, B, L, d_inner); x_dbl (S, B, L, R + 2N) = [x_proj's dt, B_t, C_t];
    dt_weight (S, d_inner, R) (dt_proj's); A (S, d_inner, N); D, delta_bias (S, d_inner); xz
    as ``mixer_conv`` (the gate z = xz[..., d_inner:]). Direction 0 scans t upwards,
    direction 1 downwards (the scan of the flipped sequence, flipped back); delta =
    softplus(dt_proj(dt) + delta_bias), y_s = (scan + D u) silu(z). Returns y
    (B, L, S, d_inner), or with ``summed`` y_0 + y_1 (B, L, 1, d_inner), for directions that
    share z (P = 1). ``out``: a contiguous tensor of y's shape to write y into (default: a
    new one)."""
    if summed and xz.shape[2] > 1:
        raise ValueError("summed directions share one gate z: one in-projection (P = 1)")
    S, batch, length, d_inner = u.shape
    out = _output(out, u, (batch, length, 1 if summed else S, d_inner))
    args = (u, x_dbl, dt_weight, A, D, xz, delta_bias)
    return _run("mixer_scan", *(x.contiguous() for x in args), summed, out)


def _output(out: torch.Tensor | None, like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """``out``, checked to be a contiguous ``shape`` tensor in ``like``'s dtype and device, or a
    new one."""
    if out is None:
        return like.new_empty(shape)
    if out.shape != shape or out.dtype != like.dtype or out.device != like.device:
        raise ValueError(
            f"out must be a {like.dtype} tensor of shape {tuple(shape)} on {like.device}, got "
            f"{out.dtype} {tuple(out.shape)} on {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    return out
