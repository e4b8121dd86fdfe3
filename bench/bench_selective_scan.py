"""CPU selective scan vs the upstream-style reference, measured side by side in one run,
and one training step of the paper-size Caduceus (d_model 118, 4 layers) at 16 x 1024.

The reference (as mamba_ssm's ``selective_scan_ref``) materialises exp(delta A) and delta B u
as (B, D, L, N) tensors and loops over L in Python; autograd gives its backward.

    python bench/bench_selective_scan.py [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F

from genodiff.backbones.caduceus import Caduceus
from genodiff.ops import selective_scan


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
    import numba

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
        print("  ".join(row))
    os.environ["GENODIFF_DISABLE_NUMBA"] = "0"
    model = Caduceus(d_model=118, n_layer=4)
    ids = torch.randint(7, 11, (16, 1024))
    step = timed(lambda ids: model(ids).logsumexp(-1).mean(), {"ids": ids}, True, args.repeats)
    print(f"Caduceus d118 x 4 layers, batch 16 x 1024, forward+backward: {step:.2f} s")


if __name__ == "__main__":
    main()
