"""Pure-PyTorch selective scan kernels (any device): sequential over L, vectorised over rows.

Same layout and interface as ``_scan_cpu`` (see there), the mixer kernels included (those
run each direction through ``forward`` on flipped and transposed views). The backward keeps a
state checkpoint every ~sqrt(L) steps and recomputes one segment at a time, so memory stays at
O(sqrt(L) * Bsz * D * N) instead of the (Bsz, D, L, N) of autograd through the loop.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _discretize(delta, bias, softplus):
    delta = delta + bias[:, None]
    return F.softplus(delta) if softplus else delta


def _at(Xk: torch.Tensor, t: int, D: int) -> torch.Tensor:
    """Row t of B or C in kernel layout, broadcast to channels: (Bb, D, N)."""
    Xt = Xk[:, :, t if Xk.shape[2] > 1 else 0]  # (Bb, G, N)
    return Xt.repeat_interleave(D // Xt.shape[1], dim=1)


def _reduce_like(grad: torch.Tensor, Xk: torch.Tensor) -> torch.Tensor:
    """Sum a per-row gradient (Bsz, D, N) into the (Bb, G, N) entries it came from."""
    Bsz, D, N = grad.shape
    grad = grad.view(Bsz, Xk.shape[1], -1, N).sum(2)
    return grad.sum(0, keepdim=True) if Xk.shape[0] == 1 else grad


def _step(h, t, dt, u, A, Bk):
    """h_t from h_{t-1}: (Bsz, D, N)."""
    dA = torch.exp(dt[:, :, t, None] * A)
    return dA * h + (dt[:, :, t] * u[:, :, t])[:, :, None] * _at(Bk, t, A.shape[0])


def forward(u, delta, A, Bk, Ck, D_skip, z, bias, softplus):
    dt = _discretize(delta, bias, softplus)
    h = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[2]):
        h = _step(h, t, dt, u, A, Bk)
        ys.append((h * _at(Ck, t, A.shape[0])).sum(-1))
    out = torch.stack(ys, dim=-1) + D_skip[:, None] * u
    return (out * F.silu(z) if z is not None else out), h


def backward(dout, u, delta, A, Bk, Ck, D_skip, z, bias, softplus):
    Bsz, D, L = u.shape
    dt = _discretize(delta, bias, softplus)
    seg = max(1, math.isqrt(L))
    checkpoints = []  # h_{s-1} for each segment start s
    h = u.new_zeros(Bsz, D, A.shape[1])
    for t in range(L):
        if t % seg == 0:
            checkpoints.append(h)
        h = _step(h, t, dt, u, A, Bk)

    du, ddt = torch.empty_like(u), torch.empty_like(u)
    dz = torch.empty_like(z) if z is not None else None
    dA, dBk, dCk = torch.zeros_like(A), torch.zeros_like(Bk), torch.zeros_like(Ck)
    dD = torch.zeros_like(D_skip)
    g = torch.zeros_like(h)  # dLoss / dh_t
    dA_next = torch.zeros_like(h)  # exp(delta_{t+1} A)
    for s in reversed(range(0, L, seg)):
        hs = [checkpoints[s // seg]]  # hs[i] = h_{s + i - 1}
        for t in range(s, min(s + seg, L)):
            hs.append(_step(hs[-1], t, dt, u, A, Bk))
        for t in reversed(range(s, min(s + seg, L))):
            h_t, h_prev = hs[t - s + 1], hs[t - s]
            Bt, Ct = _at(Bk, t, D), _at(Ck, t, D)
            dy = dout[:, :, t]
            if z is not None:
                y = (h_t * Ct).sum(-1) + D_skip * u[:, :, t]
                sz = torch.sigmoid(z[:, :, t])
                dz[:, :, t] = dy * y * sz * (1 + z[:, :, t] * (1 - sz))
                dy = dy * z[:, :, t] * sz
            dD += (dy * u[:, :, t]).sum(0)
            g = g * dA_next + Ct * dy[:, :, None]
            dCk[:, :, t if Ck.shape[2] > 1 else 0] += _reduce_like(dy[:, :, None] * h_t, Ck)
            dA_t = torch.exp(dt[:, :, t, None] * A)
            x = g * h_prev * dA_t  # dLoss / d(delta_t A)
            dA += (x * dt[:, :, t, None]).sum(0)
            gB = (g * Bt).sum(-1)
            ddt[:, :, t] = (x * A).sum(-1) + gB * u[:, :, t]
            dBk[:, :, t if Bk.shape[2] > 1 else 0] += _reduce_like(
                g * (dt[:, :, t] * u[:, :, t])[:, :, None], Bk
            )
            du[:, :, t] = gB * dt[:, :, t] + dy * D_skip
            dA_next = dA_t
    if softplus:
        ddt = ddt * torch.sigmoid(delta + bias[:, None]).masked_fill(delta + bias[:, None] > 20, 1)
    return du, ddt, dA, dBk, dCk, dD, dz, ddt.sum((0, 2))


def _to_scan(x: torch.Tensor, s: int) -> torch.Tensor:
    """(Bsz, L, C) -> (Bsz, C, L) in direction s's time order (flipped for s = 1)."""
    x = x.transpose(1, 2)
    return x.flip(-1) if s else x


def _from_scan(x: torch.Tensor, s: int) -> torch.Tensor:
    """The inverse of ``_to_scan``: (Bsz, C, L) -> (Bsz, L, C)."""
    return (x.flip(-1) if s else x).transpose(1, 2)


def mixer_conv(xz, weight, bias, u):
    S, D, K = weight.shape
    outs = []
    for s in range(S):
        x = _to_scan(xz[:, :, min(s, xz.shape[2] - 1), :D], s)  # (Bsz, D, L)
        out = F.conv1d(F.pad(x, (K - 1, 0)), weight[s, :, None], bias[s], groups=D)
        outs.append(_from_scan(F.silu(out), s))
    return torch.stack(outs, out=u)  # (S, Bsz, L, D)


def mixer_scan(u, x_dbl, dt_weight, A, D_skip, xz, bias, summed, y):
    S, _, _, D = u.shape
    N, R = A.shape[2], dt_weight.shape[2]
    delta = x_dbl[..., :R] @ dt_weight.transpose(1, 2)[:, None]  # (S, Bsz, L, D)
    ys = []
    for s in range(S):
        BC = x_dbl[s, :, :, -2 * N :]  # (Bsz, L, 2N) -> (Bsz, 1, L, 2N) in scan order
        BC = (BC.flip(1) if s else BC)[:, None]
        z = _to_scan(xz[:, :, min(s, xz.shape[2] - 1), D:], s)  # (Bsz, D, L)
        args = (_to_scan(u[s], s), _to_scan(delta[s], s), A[s], BC[..., :N], BC[..., N:])
        out, _ = forward(*args, D_skip[s], z, bias[s], True)  # (Bsz, D, L)
        ys.append(_from_scan(out, s))  # (Bsz, L, D)
    return y.copy_(sum(ys)[:, :, None]) if summed else torch.stack(ys, dim=2, out=y)
