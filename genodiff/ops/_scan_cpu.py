"""Numba kernels for the selective scan on CPU, parallel over (batch, channel) rows.

Layout shared with ``_scan_torch`` (prepared by ``selective_scan.py``), all C-contiguous in one
float dtype (float32, or float64 for float64 inputs):
    u, delta, z: (Bsz, D, L); A: (D, N); D_skip, bias: (D,)
    Bk, Ck: (Bb, G, Lb, N) -- variable (Bsz, 1, L, N), grouped (Bsz, G, L, N), or constant
            (1, D, 1, N). Channel d reads group d // (D // G); Bb == 1 / Lb == 1 broadcast.
Nothing of size (Bsz, D, L, N) is ever allocated: the backward recomputes one row's states
(and exp(delta A)) into (L, N) buffers owned by the thread and runs the reverse-time recurrence
on them.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from numba import njit, prange

NumbaError = numba.core.errors.NumbaError


@njit(inline="always")
def _softplus(x):
    return math.log1p(math.exp(x)) if x <= 20.0 else x


@njit(inline="always")
def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


@njit(parallel=True, cache=True)
def _forward_kernel(u, delta, A, Bk, Ck, D_skip, z, bias, softplus, has_z, out, last):
    Bsz, D, L = u.shape
    N = A.shape[1]
    per_gB, per_gC = D // Bk.shape[1], D // Ck.shape[1]
    for row in prange(Bsz * D):
        b, d = row // D, row % D
        Brow = Bk[b if Bk.shape[0] > 1 else 0, d // per_gB]  # (Lb, N)
        Crow = Ck[b if Ck.shape[0] > 1 else 0, d // per_gC]  # (Lb, N)
        h = np.zeros(N, dtype=u.dtype)
        for t in range(L):
            dt = delta[b, d, t] + bias[d]
            if softplus:
                dt = _softplus(dt)
            dtu = dt * u[b, d, t]
            tB = t if Brow.shape[0] > 1 else 0
            tC = t if Crow.shape[0] > 1 else 0
            y = 0.0
            for n in range(N):
                h[n] = math.exp(dt * A[d, n]) * h[n] + dtu * Brow[tB, n]
                y += Crow[tC, n] * h[n]
            y += D_skip[d] * u[b, d, t]
            if has_z:
                zt = z[b, d, t]
                y *= zt * _sigmoid(zt)
            out[b, d, t] = y
        last[b, d] = h


@njit(parallel=True, cache=True)
def _backward_kernel(
    dout, u, delta, A, Bk, Ck, D_skip, z, bias, softplus, has_z, n_chunks,
    du, ddelta, dz, dA_part, dB_part, dC_part, dD_part, dbias_part,
):  # fmt: skip
    """Work item (b, chunk of channels). Partial buffers make every write race-free:
    dA/dD/dbias_part are indexed by b; dB/dC_part by a slot unique among work items that can
    touch the same (Bb, G) entry (the chunk, times b when B/C are shared over the batch)."""
    Bsz, D, L = u.shape
    N = A.shape[1]
    per_gB, per_gC = D // Bk.shape[1], D // Ck.shape[1]
    chunk = (D + n_chunks - 1) // n_chunks
    for item in prange(Bsz * n_chunks):
        b, p = item // n_chunks, item % n_chunks
        bB = b if Bk.shape[0] > 1 else 0
        bC = b if Ck.shape[0] > 1 else 0
        sB = p if Bk.shape[0] > 1 else p + n_chunks * b
        sC = p if Ck.shape[0] > 1 else p + n_chunks * b
        hs = np.empty((L + 1, N), dtype=u.dtype)  # hs[t + 1] = h_t, hs[0] = 0
        dAs = np.empty((L + 1, N), dtype=u.dtype)  # dAs[t] = exp(delta_t A), dAs[L] = 0
        dts = np.empty(L, dtype=u.dtype)
        g = np.empty(N, dtype=u.dtype)  # dLoss / dh_t
        for d in range(p * chunk, min(D, (p + 1) * chunk)):
            gB, gC = d // per_gB, d // per_gC
            Brow, Crow = Bk[bB, gB], Ck[bC, gC]
            hs[0] = 0.0
            dAs[L] = 0.0
            for t in range(L):
                dt = delta[b, d, t] + bias[d]
                if softplus:
                    dt = _softplus(dt)
                dts[t] = dt
                dtu = dt * u[b, d, t]
                tB = t if Brow.shape[0] > 1 else 0
                for n in range(N):
                    dAs[t, n] = math.exp(dt * A[d, n])
                    hs[t + 1, n] = dAs[t, n] * hs[t, n] + dtu * Brow[tB, n]
            g[:] = 0.0
            dD_acc = 0.0
            dbias_acc = 0.0
            for t in range(L - 1, -1, -1):
                dt, ut = dts[t], u[b, d, t]
                tB = t if Brow.shape[0] > 1 else 0
                tC = t if Crow.shape[0] > 1 else 0
                dy = dout[b, d, t]
                if has_z:
                    y = D_skip[d] * ut
                    for n in range(N):
                        y += Crow[tC, n] * hs[t + 1, n]
                    zt = z[b, d, t]
                    sz = _sigmoid(zt)
                    dz[b, d, t] = dy * y * sz * (1.0 + zt * (1.0 - sz))
                    dy *= zt * sz
                dD_acc += dy * ut
                du_t = dy * D_skip[d]
                ddt = 0.0
                for n in range(N):
                    g[n] = g[n] * dAs[t + 1, n] + Crow[tC, n] * dy
                    dC_part[sC, bC, gC, tC, n] += dy * hs[t + 1, n]
                    x = g[n] * hs[t, n] * dAs[t, n]  # dLoss / d(dt * A[d, n])
                    ddt += x * A[d, n] + g[n] * Brow[tB, n] * ut
                    dA_part[b, d, n] += x * dt
                    dB_part[sB, bB, gB, tB, n] += g[n] * dt * ut
                    du_t += g[n] * dt * Brow[tB, n]
                if softplus:
                    raw = delta[b, d, t] + bias[d]
                    if raw <= 20.0:
                        ddt *= _sigmoid(raw)
                du[b, d, t] = du_t
                ddelta[b, d, t] = ddt
                dbias_acc += ddt
            dD_part[b, d] = dD_acc
            dbias_part[b, d] = dbias_acc


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().numpy()


def _dummy_z(u: torch.Tensor, z: torch.Tensor | None) -> torch.Tensor:
    return z if z is not None else u.new_empty(0, 0, 0)


def forward(u, delta, A, Bk, Ck, D_skip, z, bias, softplus):
    """-> out (Bsz, D, L) (gated when z is given), last state (Bsz, D, N)."""
    out = torch.empty_like(u)
    last = u.new_empty(u.shape[0], u.shape[1], A.shape[1])
    args = (u, delta, A, Bk, Ck, D_skip, _dummy_z(u, z), bias)
    _forward_kernel(*map(_np, args), softplus, z is not None, _np(out), _np(last))
    return out, last


def backward(dout, u, delta, A, Bk, Ck, D_skip, z, bias, softplus):
    """-> du, ddelta, dA, dBk, dCk, dD, dz (None without z), dbias; dBk/dCk in Bk/Ck layout."""
    Bsz, D, _ = u.shape
    n_chunks = max(1, min(D, -(-numba.get_num_threads() // Bsz)))
    du, ddelta = torch.empty_like(u), torch.empty_like(u)
    dz = torch.empty_like(z) if z is not None else u.new_empty(0, 0, 0)
    dA_part = u.new_zeros(Bsz, *A.shape)
    dB_part = u.new_zeros(n_chunks * (Bsz if Bk.shape[0] == 1 else 1), *Bk.shape)
    dC_part = u.new_zeros(n_chunks * (Bsz if Ck.shape[0] == 1 else 1), *Ck.shape)
    dD_part, dbias_part = u.new_empty(Bsz, D), u.new_empty(Bsz, D)
    args = (dout, u, delta, A, Bk, Ck, D_skip, _dummy_z(u, z), bias)
    outs = (du, ddelta, dz, dA_part, dB_part, dC_part, dD_part, dbias_part)
    _backward_kernel(*map(_np, args), softplus, z is not None, n_chunks, *map(_np, outs))
    dA, dBk, dCk, dD, dbias = (x.sum(0) for x in (dA_part, dB_part, dC_part, dD_part, dbias_part))
    return du, ddelta, dA, dBk, dCk, dD, (dz if z is not None else None), dbias
