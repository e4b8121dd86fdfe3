"""CPU selective scan vs the upstream-style reference, measured side by side in one run,
and one training step of the paper-size Caduceus (d_model 118, 4 layers) at 16 x 1024.

The reference (as mamba_ssm's ``selective_scan_ref``) materialises exp(delta A) and delta B u
as (B, D, L, N) tensors and loops over L in Python; autograd gives its backward. The forward is
also compared with a bare compiled loop that only does the recurrence's arithmetic (same
vectorisable exp, inputs already discretised and laid out): the floor for the numba kernel.

    python bench/bench_selective_scan.py [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time

import numba
import numpy as np
import torch
import torch.nn.functional as F

from genodiff.backbones.caduceus import Caduceus
from genodiff.ops import selective_scan
from genodiff.ops._scan_cpu import _exp


@numba.njit(parallel=True, fastmath={"reassoc", "contract"})
def _bare_loop(dt, dtu, A, B, C, y):
    """y (R, L) = <C_t, h_t>, h_t = exp(dt_t A) h_{t-1} + dtu_t B_t; dt, dtu (R, L); A (R, N);
    B, C (L, N)."""
    R, L = dt.shape
    for r in numba.prange(R):
        h = np.zeros(A.shape[1], dtype=dt.dtype)
        for t in range(L):
            acc = dt.dtype.type(0)
            for n in range(A.shape[1]):
                h[n] = _exp(dt[r, t] * A[r, n]) * h[n] + dtu[r, t] * B[t, n]
                acc += C[t, n] * h[n]
            y[r, t] = acc


def bare_inputs(u, delta, A, B, C, D, z, delta_bias):
    """The bare loop's inputs (batch 0's B and C for every row), prepared outside the timing."""
    dt = F.softplus(delta + delta_bias[:, None]).flatten(0, 1)
    B, C = (X[0].T.contiguous().numpy() for X in (B, C))
    A = A.repeat(u.shape[0], 1).numpy()
    dtu = (dt * u.flatten(0, 1)).numpy()
    return {"dt": dt.numpy(), "dtu": dtu, "A": A, "B": B, "C": C, "y": np.empty_like(dtu)}


def scan_bare(dt, dtu, A, B, C, y):
    _bare_loop(dt, dtu, A, B, C, y)


def scan_materialised(u, delta, A, B, C, D, z, delta_bias):
    delta = F.softplus(delta + delta_bias[:, None])
    deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))  # (B, D, L, N)
    deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)  # (B, D, L, N)
    h = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[2]):
        h = deltaA[:, :, t] * h + deltaB_u[:, :, t]
        ys.append(torch.einsum("bdn,bn->bd", h, C[:, :, t]))
    return (torch.stack(ys, dim=2) + D[:, None] * u) * F.silu(z)


def scan_genodiff(u, delta, A, B, C, D, z, delta_bias):
    return selective_scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus=True)


def inputs(Bsz, Dn, L, N, grad):
    x = {
        "u": torch.randn(Bsz, Dn, L),
        "delta": torch.randn(Bsz, Dn, L) * 0.5,
        "A": -torch.arange(1, N + 1.0).repeat(Dn, 1),
        "B": torch.randn(Bsz, N, L),
        "C": torch.randn(Bsz, N, L),
        "D": torch.ones(Dn),
        "z": torch.randn(Bsz, Dn, L),
        "delta_bias": torch.randn(Dn) * 0.5 - 4,
    }
    return {k: v.requires_grad_(grad) for k, v in x.items()}


def timed(fn, x, backward, repeats):
    def once():
        out = fn(**x)
        if backward:
            out.sum().backward()

    once()  # warm-up (numba compiles or loads its cache here)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    print(f"threads={args.threads}  B=2 D=256 N=16 fp32, best of {args.repeats}")
    for label, L, backward in (("forward", 1024, False), ("forward+backward", 512, True)):
        x = inputs(2, 256, L, 16, grad=backward)
        ref = timed(scan_materialised, x, backward, args.repeats)
        row = [f"{label:>16} L={L:<5} reference {ref * 1e3:8.1f} ms"]
        for backend, env in (("numba", "0"), ("torch-fallback", "1")):
            os.environ["GENODIFF_DISABLE_NUMBA"] = env
            ours = timed(scan_genodiff, x, backward, args.repeats)
            row.append(f"{backend} {ours * 1e3:8.1f} ms ({ref / ours:5.1f}x)")
            if backend == "numba" and not backward:
                x_bare = bare_inputs(**{k: v.detach() for k, v in x.items()})
                bare = timed(scan_bare, x_bare, False, args.repeats)
                row.append(f"bare loop {bare * 1e3:6.1f} ms (numba / bare {ours / bare:4.2f})")
        print("  ".join(row))
    os.environ["GENODIFF_DISABLE_NUMBA"] = "0"
    x = inputs(16, 128, 1024, 16, grad=True)  # one Mamba layer of the paper-size models
    fwd = timed(scan_genodiff, x, False, args.repeats)
    fwd_bwd = timed(scan_genodiff, x, True, args.repeats)
    bwd = fwd_bwd - fwd
    print(f"numba B=16 D=128 L=1024: forward {fwd * 1e3:.1f} ms, backward {bwd * 1e3:.1f} ms")
    model = Caduceus(d_model=118, n_layer=4, vocab_size=12)
    ids = torch.randint(7, 11, (16, 1024))
    step = timed(lambda ids: model(ids).logsumexp(-1).mean(), {"ids": ids}, True, args.repeats)
    print(f"Caduceus d118 x 4 layers, batch 16 x 1024, forward+backward: {step:.2f} s")


if __name__ == "__main__":
    main()
