"""Training steps (forward + backward + AdamW) of the causal Mamba LM, d_model 128 x 4 layers.

1. Scaling with L: each (batch, L) runs in a fresh subprocess (one warm-up step at 1 x 64 first,
   so numba and AdamW's state are ready), best-of-N step time and the peak resident-set increase
   of the timed steps (ru_maxrss after minus RSS before). Both constant tokens (B*L = 8,192) and
   constant batch (B=1) are run.
2. genodiff's MambaLM vs Hugging Face transformers' MambaForCausalLM (its PyTorch path) at the
   same size, interleaved in one process, batch 2 x 512. Skipped, with a message, when
   transformers is not installed (it is not a genodiff dependency).

    python bench/bench_mamba_lm.py [--threads 1] [--repeats 3] [--skip-scaling] [--skip-hf]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from genodiff.backbones.mamba_lm import MambaLM

MIB = 2**20
SHAPES = [(8, 1024), (2, 4096), (1, 16384), (1, 1024), (1, 4096)]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def make_step(model: torch.nn.Module, logits_of, vocab: int):
    """One training step: next-token cross-entropy over random ids, backward, AdamW."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(ids: torch.Tensor) -> float:
        logits = logits_of(model, ids)[:, :-1, :vocab]
        loss = F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def genodiff_model() -> MambaLM:
    return MambaLM(d_model=128, n_layer=4, vocab_size=12)


def timed(step, ids: torch.Tensor) -> float:
    start = time.perf_counter()
    step(ids)
    return time.perf_counter() - start


def child(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    step = make_step(genodiff_model(), lambda m, ids: m(ids), 12)
    step(torch.randint(0, 12, (1, 64)))  # warm-up: numba, AdamW state
    ids = torch.randint(0, 12, (args.batch, args.L))
    before = rss_bytes()
    best = min(timed(step, ids) for _ in range(args.repeats))
    print(json.dumps({"seconds": best, "peak": maxrss_bytes() - before}), flush=True)


def scaling(args: argparse.Namespace) -> None:
    print(f"\nMambaLM d128 x 4 training step, threads={args.threads}, best of {args.repeats}")
    print(
        f"{'batch x L':>12} {'tokens':>7} {'step s':>8} {'us/token':>9} {'peak MiB':>9}"
        f" {'KiB/token':>10}"
    )
    for batch, L in SHAPES:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", str(args.threads)]
        cmd += ["--batch", str(batch), "--L", str(L), "--repeats", str(args.repeats)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        tokens = batch * L
        print(
            f"{f'{batch} x {L}':>12} {tokens:>7} {r['seconds']:>8.3f} "
            f"{r['seconds'] / tokens * 1e6:>9.1f} {r['peak'] / MIB:>9.1f} "
            f"{r['peak'] / 1024 / tokens:>10.2f}",
            flush=True,
        )


def versus_transformers(args: argparse.Namespace) -> None:
    try:
        import transformers
        from transformers import MambaConfig, MambaForCausalLM
    except ImportError:
        print("\ntransformers is not installed: skipping the MambaForCausalLM comparison")
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = MambaConfig(
        vocab_size=16,
        hidden_size=128,
        num_hidden_layers=4,
        state_size=16,
        expand=2,
        conv_kernel=4,
        tie_word_embeddings=True,
        use_cache=False,
    )
    hf = MambaForCausalLM(cfg)
    ours = genodiff_model()
    n_hf, n_ours = (sum(p.numel() for p in m.parameters()) for m in (hf, ours))
    print(f"\ngenodiff MambaLM vs transformers {transformers.__version__} MambaForCausalLM,")
    print(f"batch {args.hf_batch} x {args.hf_L}, threads={args.threads}, best of {args.repeats}")
    print(f"params: genodiff {n_ours:,}, transformers {n_hf:,} (difference {n_hf - n_ours:+,})")
    steps = {
        "genodiff": make_step(ours, lambda m, ids: m(ids), 12),
        "transformers": make_step(hf, lambda m, ids: m(input_ids=ids, use_cache=False).logits, 12),
    }
    ids = torch.randint(0, 12, (args.hf_batch, args.hf_L))
    for step in steps.values():
        step(ids)  # warm-up
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(args.repeats):  # interleaved, so both see the same machine load
        for name, step in steps.items():
            best[name] = min(best[name], timed(step, ids))
    for name, seconds in best.items():
        print(f"{name:>13}: {seconds:8.3f} s/step")
    print(f"{'ratio':>13}: {best['transformers'] / best['genodiff']:8.1f}x faster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=float, default=300.0, help="seconds per scaling run")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--hf-batch", type=int, default=2)
    parser.add_argument("--hf-L", type=int, default=512)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--L", type=int, default=1024, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if not args.skip_scaling:
        scaling(args)
    if not args.skip_hf:
        versus_transformers(args)


if __name__ == "__main__":
    main()
