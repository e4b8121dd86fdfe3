"""Stand-in for ``mamba_ssm.ops.triton.selective_state_update``: one recurrent scan step.

The wrapper's asserts, after it adds a heads dim of 1 to the head-less (Mamba-1) shapes:
state (batch, nheads, dim, dstate); x, dt, z (batch, nheads, dim); A (nheads, dim, dstate);
B and C the same shape (batch, ngroups, dstate) with nheads % ngroups == 0; D and dt_bias
(nheads, dim). The kernel indexes the state by batch row, so here the state's batch must be
x's. Computed in float32 (dt <- softplus where dt <= 20): the state is written back in its own
dtype, the output is in x's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.fakes._contract import calls, not_modelled, require, same_device, shape


def selective_state_update(
    state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
    state_batch_indices=None,
):  # fmt: skip
    calls["selective_state_update"] += 1
    not_modelled(state_batch_indices is not None, "state_batch_indices")
    has_heads = state.dim() > 3

    def heads(t, at):  # the head-less form gets a heads dim of 1
        return t.unsqueeze(at) if t is not None and not has_heads else t

    state4, x3, dt3, z3 = heads(state, 1), heads(x, 1), heads(dt, 1), heads(z, 1)
    A3, B3, C3 = heads(A, 0), heads(B, 1), heads(C, 1)
    D2, bias2 = heads(D, 0), heads(dt_bias, 0)
    require(state4.dim() == 4, "state must be (batch, dim, dstate) or with heads")
    _, nheads, dim, dstate = state4.shape
    batch = x3.shape[0]
    shape(x3, (batch, nheads, dim), "x")
    shape(state4, (batch, nheads, dim, dstate), "state")
    shape(dt3, tuple(x3.shape), "dt")
    shape(A3, (nheads, dim, dstate), "A")
    ngroups = B3.shape[1]
    require(nheads % ngroups == 0, "nheads must be divisible by ngroups")
    shape(B3, (batch, ngroups, dstate), "B")
    shape(C3, tuple(B3.shape), "C")
    for name, t in (("D", D2), ("dt_bias", bias2)):
        if t is not None:
            shape(t, (nheads, dim), name)
    if z3 is not None:
        shape(z3, tuple(x3.shape), "z")
    same_device(x, state=state, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=dt_bias)

    with torch.autocast(x.device.type, enabled=False):
        dtf = dt3.float() + (bias2.float() if bias2 is not None else 0)
        if dt_softplus:
            dtf = torch.where(dtf <= 20.0, F.softplus(dtf), dtf)
        xf = x3.float()
        Bh = B3.float().repeat_interleave(nheads // ngroups, dim=1)  # (batch, nheads, dstate)
        Ch = C3.float().repeat_interleave(nheads // ngroups, dim=1)
        h = state4.float() * torch.exp(A3.float() * dtf.unsqueeze(-1))
        h = h + (dtf * xf).unsqueeze(-1) * Bh.unsqueeze(2)  # (batch, nheads, dim, dstate)
        state4.copy_(h)
        out = (h * Ch.unsqueeze(2)).sum(-1)  # (batch, nheads, dim)
        if D2 is not None:
            out = out + xf * D2.float()
        if z3 is not None:
            out = out * F.silu(z3.float())
    out = out.to(x.dtype)
    return out if has_heads else out.squeeze(1)
