"""Masked-diffusion samplers side by side: network rows per sequence and wall time.

One run, the same Caduceus (tiny config: d_model 64, 2 layers, random weights unless a
checkpoint is given) and the same seed for every sampler:

- ancestral with T = L and T = 4 L steps (the MDLM paper's 1024 / 4096 for L = 1024),
- cached (ancestral reusing x_theta per unchanged sequence) with T = 4 L,
- first-hitting (one unmasking event per network call: at most L calls per sequence),
- an autoregressive Mamba of about the same parameter count (recurrent steps), for scale.

When and where tokens unmask depends only on the schedule and the random draws, not on what
the weights predict, so call counts and times measured with random weights are those of a
trained model of the same size. Counted: sequences (rows) passed to the network divided by
the number of samples, i.e. network calls per sequence.

    nice python bench/bench_sampling.py [--num-samples 16] [--length 1024] [--threads 2]
        [--checkpoint runs/x/checkpoints/last.ckpt] [--skip-ar]
"""

from __future__ import annotations

import argparse
import time

import torch
from omegaconf import OmegaConf
from torch import nn

from genodiff.backbones import build
from genodiff.objectives import MDLM
from genodiff.objectives.ar import AR
from genodiff.sampling import SampleRequest


class RowCounter(nn.Module):
    """Wraps a backbone and counts the sequences it is called on."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.rows = 0

    def forward(self, input_ids, sigma=None):
        self.rows += input_ids.shape[0]
        return self.backbone(input_ids, sigma)


def caduceus_tiny(checkpoint: str | None) -> nn.Module:
    if checkpoint:
        from genodiff.training import load_checkpoint

        return load_checkpoint(checkpoint).eval_backbone
    config = OmegaConf.load("configs/model/caduceus_tiny.yaml")
    base = OmegaConf.load("configs/model/caduceus_ph.yaml")
    merged = OmegaConf.merge(base, {k: v for k, v in config.items() if k != "defaults"})
    return build(**OmegaConf.to_container(merged))


def mamba_matching(parameters: int) -> nn.Module:
    """A causal Mamba LM, d_model chosen so its parameter count is closest to ``parameters``."""
    config = OmegaConf.to_container(OmegaConf.load("configs/model/mamba.yaml"))
    candidates = [build(**{**config, "d_model": d, "n_layer": 2}) for d in range(32, 129, 8)]
    return min(candidates, key=lambda m: abs(count(m) - parameters))


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def timed(objective, model: nn.Module, request: SampleRequest, seed: int) -> tuple[float, float]:
    """(seconds, network calls per sequence) for one sampling run."""
    counter = RowCounter(model).eval()
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    with torch.no_grad():
        samples = objective.sample(counter, request, generator)
    seconds = time.perf_counter() - start
    assert samples.shape == (request.num_samples, request.length)
    return seconds, counter.rows / request.num_samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-samples", type=int, default=16)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--checkpoint", default=None, help="MDLM checkpoint (default: random)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-ar", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    n, length = args.num_samples, args.length

    backbone = caduceus_tiny(args.checkpoint).eval()
    objective = MDLM()
    runs = [
        ("ancestral", length),
        ("ancestral", 4 * length),
        ("cached", 4 * length),
        ("first-hitting", None),
    ]
    print(
        f"{n} x {length} bp, Caduceus {count(backbone):,} parameters, torch threads "
        f"{torch.get_num_threads()}"
    )
    print("| sampler | steps T | network calls / sequence | wall time (s) |")
    print("|---|---|---|---|")
    results = {}
    for sampler, steps in runs:
        request = SampleRequest(n, length, steps=steps or 1, sampler=sampler)
        seconds, calls = timed(objective, backbone, request, args.seed)
        results[(sampler, steps)] = seconds
        print(f"| {sampler} | {steps or '-'} | {calls:.1f} | {seconds:.1f} |", flush=True)
    if not args.skip_ar:
        mamba = mamba_matching(count(backbone)).eval()
        request = SampleRequest(n, length, sampler="ancestral")
        start = time.perf_counter()
        with torch.no_grad():  # not wrapped: the recurrent path needs the model's own step()
            AR().sample(mamba, request, torch.Generator().manual_seed(args.seed))
        seconds = time.perf_counter() - start
        print(
            f"| AR Mamba ({count(mamba):,} parameters) | - | {length} recurrent steps "
            f"| {seconds:.1f} |",
            flush=True,
        )
    speedup = results[("ancestral", 4 * length)] / results[("cached", 4 * length)]
    print(f"cached vs ancestral at T = {4 * length}: {speedup:.2f}x faster")


if __name__ == "__main__":
    main()
