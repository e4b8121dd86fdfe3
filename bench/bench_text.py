"""The text plugin's transformers (genodiff-text): training step and AR sampling, side by side.

(a) MDLM DiT training step (MDLM loss with time conditioning, forward + backward + AdamW) at
    L = 128: tokens/s and peak memory, with the models' attention function as shipped
    (``torch.nn.functional.scaled_dot_product_attention``) vs an explicit
    softmax(q k^T / sqrt(d)) v swapped in. Each configuration runs in a fresh subprocess: peak
    memory is the increase of the process's max RSS over its resting size after the warm-up
    step (CPU), or torch.cuda.max_memory_allocated over the memory allocated before the timed
    steps (CUDA).
(b) The AR transformer's sampler (genodiff's AR objective): with the key/value cache (one
    position per network call) vs recomputing the whole prefix for every token, same seed;
    tokens/s and whether both draw the same samples.

Sizes: MDLM small (768 wide, 12 blocks, 12 heads, cond 128) at the LM1B vocabulary (30,522);
``--quick`` runs a tiny model for a smoke test. Random weights (the output layer is re-drawn,
as upstream zero-initialises it), so the cost is that of a trained model of the same size.

Needs the plugin installed (``pip install -e plugins/genodiff-text``).

    nice python bench/bench_text.py [--device cpu|cuda] [--batch 4] [--length 128]
        [--steps 3] [--num-samples 4] [--sample-length 128] [--threads N] [--json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.util import find_spec
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from genodiff.backbones.capabilities import Capabilities
from genodiff.objectives import AR, MDLM
from genodiff.samplers.request import SampleRequest

if TYPE_CHECKING:
    from genodiff_text.models.ar import ARTransformer

MIB = 2**20
VOCAB = 30_522  # bert-base-uncased (LM1B)
MASK_ID, PAD_ID, BOS_ID = 103, 0, 101  # its [MASK], [PAD], [CLS]


@dataclass(frozen=True)
class Size:
    hidden_dim: int
    n_blocks: int
    n_heads: int
    cond_dim: int
    vocab_size: int


SMALL = Size(hidden_dim=768, n_blocks=12, n_heads=12, cond_dim=128, vocab_size=VOCAB)
TINY = Size(hidden_dim=64, n_blocks=2, n_heads=2, cond_dim=32, vocab_size=512)


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """softmax(q k^T / sqrt(head_dim)) v with the (B, H, Lq, Lk) score matrix materialised."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if causal:
        later = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(later, -math.inf)
    return scores.softmax(dim=-1) @ v  # (B, H, Lq, hd)


ATTENTION = ("sdpa", "explicit")  # the plugin's attention as shipped, explicit_attention


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def redraw_output_layer(model: nn.Module) -> nn.Module:
    """Upstream zero-initialises the output linear (all logits equal); draw it instead."""
    with torch.no_grad():
        model.output_layer.linear.weight.normal_(0.0, 0.02)
    return model


# ----------------------------------------------------------------------------- (a) training


def train_child(args: argparse.Namespace) -> dict:
    """One configuration, in this (fresh) process: time ``args.steps`` training steps."""
    from genodiff_text.models import layers
    from genodiff_text.models.dit import DIT

    if args.attention == "explicit":
        layers.attention = explicit_attention
    device = torch.device(args.device)
    size = TINY if args.quick else SMALL
    torch.manual_seed(0)
    model = DIT(
        vocab_size=size.vocab_size,
        hidden_dim=size.hidden_dim,
        cond_dim=size.cond_dim,
        n_blocks=size.n_blocks,
        n_heads=size.n_heads,
        model_length=args.length,
    )
    model = redraw_output_layer(model).to(device).train()
    objective = MDLM(mask_id=MASK_ID, pad_id=PAD_ID, time_conditioning=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device).manual_seed(0)
    # ids above the special tokens ([PAD] 0, [CLS] 101, [MASK] 103)
    ids = torch.randint(200, size.vocab_size, (args.batch, args.length), device=device)

    def step() -> None:
        nelbo, tokens = objective.loss(model, ids, gen)
        loss = nelbo.sum() / tokens.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step()  # warm-up: AdamW state, gradients, kernels
    synchronize(device)
    resting = rss_bytes()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        allocated = torch.cuda.memory_allocated(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    synchronize(device)
    seconds = (time.perf_counter() - start) / args.steps
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) - allocated
    else:
        peak = maxrss_bytes() - resting
    return {
        "attention": args.attention,
        "params": sum(p.numel() for p in model.parameters()),
        "seconds_per_step": seconds,
        "tokens_per_s": args.batch * args.length / seconds,
        "peak_mib": peak / MIB,
    }


def run_child(args: argparse.Namespace, attention: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--attention", attention]
    cmd += ["--device", args.device, "--batch", str(args.batch), "--length", str(args.length)]
    cmd += ["--steps", str(args.steps)]
    cmd += ["--threads", str(args.threads)] if args.threads else []
    cmd += ["--quick"] if args.quick else []
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def training(args: argparse.Namespace) -> dict:
    rows = {name: run_child(args, name) for name in ATTENTION}
    sdpa, explicit = rows["sdpa"], rows["explicit"]
    print(
        f"\n(a) DiT training step (MDLM loss, fwd + bwd + AdamW), {sdpa['params']:,} params, "
        f"batch {args.batch} x L {args.length}, {args.device}, mean of {args.steps} steps"
    )
    print(f"{'attention':>10} {'s/step':>9} {'tokens/s':>10} {'peak MiB':>9}")
    for name, r in rows.items():
        print(
            f"{name:>10} {r['seconds_per_step']:>9.3f} {r['tokens_per_s']:>10.1f} "
            f"{r['peak_mib']:>9.1f}"
        )
    ratios = {
        "speed_sdpa_over_explicit": sdpa["tokens_per_s"] / explicit["tokens_per_s"],
        "memory_explicit_over_sdpa": explicit["peak_mib"] / max(sdpa["peak_mib"], 1e-9),
    }
    print(
        f"{'ratio':>10} SDPA {ratios['speed_sdpa_over_explicit']:.2f}x the tokens/s, explicit "
        f"{ratios['memory_explicit_over_sdpa']:.2f}x the peak memory"
    )
    return {"rows": rows, **ratios}


# ----------------------------------------------------------------------------- (b) sampling


class FullPrefix(nn.Module):
    """The same model declaring no recurrent step: the AR sampler re-runs the whole prefix."""

    def __init__(self, model: ARTransformer) -> None:
        super().__init__()
        self.model = model
        self.capabilities = Capabilities(
            vocab_size=model.vocab_size, hidden_size=model.hidden_dim, causal=True
        )

    def forward(self, input_ids: Tensor, sigma: Tensor | None = None) -> Tensor:
        return self.model(input_ids)


def sampling(args: argparse.Namespace) -> dict:
    from genodiff_text.models.ar import ARTransformer

    device = torch.device(args.device)
    size = TINY if args.quick else SMALL
    torch.manual_seed(0)
    model = ARTransformer(
        vocab_size=size.vocab_size,
        hidden_dim=size.hidden_dim,
        n_blocks=size.n_blocks,
        n_heads=size.n_heads,
        mask_index=MASK_ID,
    )
    model = redraw_output_layer(model).to(device).eval()
    sample_ids = [i for i in range(size.vocab_size) if i not in (MASK_ID, PAD_ID, BOS_ID)]
    objective = AR(bos_id=BOS_ID, pad_id=PAD_ID, sample_ids=sample_ids)
    request = SampleRequest(num_samples=args.num_samples, length=args.sample_length)
    runs = {"kv cache": model, "full prefix": FullPrefix(model)}
    samples, rows = {}, {}
    warm_up = SampleRequest(num_samples=args.num_samples, length=2)
    for name, net in runs.items():
        objective.sample(net, warm_up, torch.Generator(device).manual_seed(0))
        synchronize(device)
        start = time.perf_counter()
        samples[name] = objective.sample(net, request, torch.Generator(device).manual_seed(1))
        synchronize(device)
        seconds = time.perf_counter() - start
        rows[name] = {
            "seconds": seconds,
            "tokens_per_s": args.num_samples * args.sample_length / seconds,
        }
    differing = int((samples["kv cache"] != samples["full prefix"]).sum())
    speedup = rows["kv cache"]["tokens_per_s"] / rows["full prefix"]["tokens_per_s"]
    params = sum(p.numel() for p in model.parameters())
    print(
        f"\n(b) AR transformer sampling, {params:,} params, {args.num_samples} samples x "
        f"{args.sample_length} tokens, {args.device}, seed 1"
    )
    print(f"{'sampler':>12} {'seconds':>9} {'tokens/s':>10}")
    for name, r in rows.items():
        print(f"{name:>12} {r['seconds']:>9.3f} {r['tokens_per_s']:>10.1f}")
    print(f"{'ratio':>12} the cache {speedup:.2f}x the tokens/s")
    same = "identical" if differing == 0 else f"{differing} tokens differ (rounding)"
    print(f"{'samples':>12} {same}")
    return {"rows": rows, "speed_cache_over_full": speedup, "differing_tokens": differing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=4, help="training batch size")
    parser.add_argument("--length", type=int, default=128, help="training sequence length")
    parser.add_argument("--steps", type=int, default=3, help="timed training steps")
    parser.add_argument("--num-samples", type=int, default=4)
    parser.add_argument("--sample-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--limit", type=float, default=1800.0, help="seconds per child")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument("--quick", action="store_true", help="tiny model, short runs (smoke)")
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--skip-sampling", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--attention", choices=sorted(ATTENTION), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if find_spec("genodiff_text") is None:
        parser.error("needs the text plugin: pip install -e plugins/genodiff-text")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(train_child(args)), flush=True)
        return
    if args.quick:
        args.length, args.batch, args.steps = min(args.length, 32), min(args.batch, 2), 1
        args.num_samples, args.sample_length = min(args.num_samples, 2), min(args.sample_length, 8)
    results = {"device": args.device, "quick": args.quick, "threads": torch.get_num_threads()}
    if not args.skip_training:
        results["training"] = training(args)
    if not args.skip_sampling:
        results["sampling"] = sampling(args)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
