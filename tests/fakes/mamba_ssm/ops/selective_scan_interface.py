"""Stand-in for ``mamba_ssm.ops.selective_scan_interface``: ``selective_scan_fn`` and the fused
``mamba_inner_fn``.

Preconditions of the scan kernel (csrc/selective_scan/selective_scan.cpp) after what the Python
wrapper fixes (it makes the last dim of u, delta, B, C, z contiguous and B, C (b, n, l) ->
(b, 1, n, l); ``mamba_inner_fn`` calls the kernel directly, without that wrapper):
- u in float32 / float16 / bfloat16; delta and z in u's dtype; A float32 (complex A is not
  modelled); variable B / C in u's dtype, constant (dim, dstate) B / C in A's dtype;
- u, delta, z (batch, dim, seqlen); A (dim, dstate) with dstate <= 256; variable B and C
  (batch, n_groups, dstate, seqlen) with the SAME n_groups (B's); D and delta_bias float32 (dim,);
- stride 1 over the last dim of u, delta, z, B, C, D, delta_bias.
The result is computed in float32: out in u's dtype; with return_last_state also the state at
the last step (batch, dim, dstate) in float32, without gradient. ``mamba_inner_fn`` adds its own
rules: conv1d_weight (dim, 1, width) as nn.Conv1d stores it, checkpoint_lvl 0 or 1, the
projection weights cast to the autocast dtype when autocast is on, then the conv kernel's and the
scan kernel's preconditions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.fakes._contract import KERNEL_DTYPES, calls, not_modelled, require, same_device, shape
from tests.fakes.causal_conv1d import causal_conv1d_fwd_function


def _check(u, delta, A, B, C, D, z, delta_bias) -> None:
    """selective_scan_cuda.fwd's checks; B, C are (dim, dstate) or (batch, G, dstate, seqlen)."""
    require(u.dtype in KERNEL_DTYPES, f"u dtype {u.dtype} not supported")
    not_modelled(A.is_complex(), "complex A")
    require(A.dtype == torch.float32, "A must be float32")
    require(delta.dtype == u.dtype, "delta must have u's dtype")
    require(u.dim() == 3, "u must be (batch, dim, seqlen)")
    batch, dim, seqlen = u.shape
    dstate = A.shape[-1]
    require(dstate <= 256, "selective_scan only supports state dimension <= 256")
    shape(delta, (batch, dim, seqlen), "delta")
    shape(A, (dim, dstate), "A")
    n_groups = B.shape[1] if B.dim() >= 3 else 1
    for name, X in (("B", B), ("C", C)):
        if X.dim() >= 3:
            require(X.dtype == u.dtype, f"variable {name} must have u's dtype")
            shape(X, (batch, n_groups, dstate, seqlen), name)
        else:
            require(X.dtype == A.dtype, f"constant {name} must have A's dtype")
            shape(X, (dim, dstate), name)
    for name, t in (("D", D), ("delta_bias", delta_bias)):
        if t is not None:
            require(t.dtype == torch.float32, f"{name} must be float32")
            shape(t, (dim,), name)
    if z is not None:
        require(z.dtype == u.dtype, "z must have u's dtype")
        shape(z, (batch, dim, seqlen), "z")
    tensors = {"u": u, "delta": delta, "B": B, "C": C, "D": D, "z": z, "delta_bias": delta_bias}
    for name, t in tensors.items():
        require(t is None or t.stride(-1) == 1 or t.shape[-1] == 1, f"{name}: stride(-1) != 1")
    same_device(u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias)


def _per_channel(X: torch.Tensor, dim: int) -> torch.Tensor:
    """Variable (batch, G, dstate, seqlen) -> (batch, dim, dstate, seqlen), channel d reading
    group d // (dim / G); constant (dim, dstate) unchanged. In float32."""
    X = X.float()
    return X.repeat_interleave(dim // X.shape[1], dim=1) if X.dim() == 4 else X


def _scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
    """Checks, then the recurrence step by step in float32: -> (out, last_state)."""
    _check(u, delta, A, B, C, D, z, delta_bias)
    with torch.autocast(u.device.type, enabled=False):
        dt = delta.float() + (delta_bias.float().unsqueeze(-1) if delta_bias is not None else 0)
        if delta_softplus:
            dt = F.softplus(dt)  # linear past 20, as the kernel
        uf = u.float()
        Bs, Cs = _per_channel(B, u.shape[1]), _per_channel(C, u.shape[1])
        h = u.new_zeros(*u.shape[:2], A.shape[1], dtype=torch.float32)  # (batch, dim, dstate)
        ys = []
        for t in range(u.shape[-1]):
            Bt = Bs[..., t] if Bs.dim() == 4 else Bs
            Ct = Cs[..., t] if Cs.dim() == 4 else Cs
            h = torch.exp(dt[..., t, None] * A) * h + (dt[..., t] * uf[..., t]).unsqueeze(-1) * Bt
            ys.append((h * Ct).sum(-1))
        out = torch.stack(ys, dim=-1)  # (batch, dim, seqlen)
        if D is not None:
            out = out + D.unsqueeze(-1) * uf
        if z is not None:
            out = out * F.silu(z.float())
    return out.to(u.dtype), h.detach()


def selective_scan_fn(
    u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
    return_last_state=False,
):  # fmt: skip
    """As upstream: out (batch, dim, seqlen), or (out, last_state) with return_last_state.

    As the real kernel, a constant B (dim, dstate) is kept out of the running state, so the
    last state returned is h_L / B (seen on an H200 with mamba-ssm 2.3.2.post1; the output is
    unaffected)."""
    calls["selective_scan_fn"] += 1
    constant_b = B.dim() == 2

    def last_dim_contiguous(t):
        return t.contiguous() if t is not None and t.stride(-1) != 1 else t

    u, delta, B, C, z = map(last_dim_contiguous, (u, delta, B, C, z))
    D = D.contiguous() if D is not None else None
    B = B.unsqueeze(1) if B.dim() == 3 else B
    C = C.unsqueeze(1) if C.dim() == 3 else C
    out, last_state = _scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus)
    if return_last_state and constant_b:  # the state the kernel keeps: the scan with B = 1
        _, last_state = _scan(u, delta, A, torch.ones_like(B), C, D, z, delta_bias, delta_softplus)
    return (out, last_state) if return_last_state else out


def mamba_inner_fn(
    xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, out_proj_weight,
    out_proj_bias, A, B=None, C=None, D=None, delta_bias=None, B_proj_bias=None,
    C_proj_bias=None, delta_softplus=True, checkpoint_lvl=1, b_rms_weight=None,
    c_rms_weight=None, dt_rms_weight=None, b_c_dt_rms_eps=1e-6,
):  # fmt: skip
    """The whole Mamba mixer after in_proj: xz (batch, 2 dim, seqlen) -> (batch, seqlen, d)."""
    calls["mamba_inner_fn"] += 1
    not_modelled(B is not None or C is not None, "constant B / C in mamba_inner_fn")
    not_modelled(B_proj_bias is not None or C_proj_bias is not None, "B / C projection biases")
    not_modelled(any(w is not None for w in (b_rms_weight, c_rms_weight, dt_rms_weight)), "rms")
    require(checkpoint_lvl in (0, 1), "checkpoint_lvl must be 0 or 1")
    require(
        conv1d_weight.dim() == 3 and conv1d_weight.shape[1] == 1,
        "conv1d_weight must be (dim, 1, width), as nn.Conv1d stores it",
    )
    device_type = xz.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        x_proj_weight, delta_proj_weight, out_proj_weight = (
            w.to(dtype) for w in (x_proj_weight, delta_proj_weight, out_proj_weight)
        )
        out_proj_bias = out_proj_bias.to(dtype) if out_proj_bias is not None else None
    batch, _, seqlen = xz.shape
    rank, dstate = delta_proj_weight.shape[1], A.shape[-1]
    xz = xz.contiguous() if xz.stride(-1) != 1 else xz
    x, z = xz.chunk(2, dim=1)  # (batch, dim, seqlen) each
    bias = conv1d_bias.contiguous() if conv1d_bias is not None else None
    conv_out = causal_conv1d_fwd_function(x, conv1d_weight[:, 0], bias, silu=True)
    x_dbl = F.linear(conv_out.transpose(1, 2).reshape(batch * seqlen, -1), x_proj_weight)
    delta = (delta_proj_weight @ x_dbl[:, :rank].t()).view(-1, batch, seqlen).transpose(0, 1)

    def variable(cols: torch.Tensor) -> torch.Tensor:  # (b l, dstate) -> (b, 1, dstate, l)
        return cols.reshape(batch, seqlen, dstate).transpose(1, 2).unsqueeze(1).contiguous()

    B = variable(x_dbl[:, rank : rank + dstate])
    C = variable(x_dbl[:, rank + dstate :])
    D = D.contiguous() if D is not None else None
    out_z, _ = _scan(conv_out, delta, A, B, C, D, z, delta_bias, delta_softplus)
    return F.linear(out_z.transpose(1, 2), out_proj_weight, out_proj_bias)
