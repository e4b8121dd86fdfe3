"""Masked-diffusion samplers side by side: network rows per sequence, wall time and bp/s, the
inference path against the training path in the same process.

One run, the same Caduceus (tiny config: d_model 64, 2 layers, random weights unless a
checkpoint is given) and the same seed for every sampler:

- ancestral with T = L and T = 4 L steps (the MDLM paper's 1024 / 4096 for L = 1024),
- cached (ancestral reusing x_theta per unchanged sequence) with T = 4 L,
- first-hitting (one unmasking event per network call: at most L calls per sequence),
- semi-autoregressive (windows of L / 2 advancing by L / 4, T = L / 2 per window),
- an autoregressive Mamba of about the same parameter count (recurrent steps), for scale.

Every sampler runs on the inference path (``genodiff.ops.inference``: forward-only scan, both
BiMamba directions in one pass, batches in cache-sized row chunks); those named by
``--compare`` run again inside ``training_path()`` (the autograd scan and one Mamba pass per
direction on the whole batch, the network as it ran before the inference path), and the
table gives the speed-up and whether the two runs drew the same samples (same seed; the two
paths round differently, so a draw that falls within rounding of a category boundary can
differ). Also printed: the network call of the samplers
(``x0_log_probs``) against a bare forward of the model, and the forward's 1 -> 2 thread
scaling (torch and numba threads together).

Two thread pools share the cores (torch's OpenMP runtime and numba's), and OpenMP threads
spin while they wait: on a machine where other jobs run, 2 threads then measured 5-10x slower
than 1 at small sizes (4 x 128 bp, both paths). ``OMP_WAIT_POLICY=PASSIVE`` removed that;
genodiff's commands now limit the spinning (``GOMP_SPINCOUNT=1000``, genodiff/threads.py);
this script loads torch first, so it runs with the environment's settings, which the header
prints.

When and where tokens unmask depends only on the schedule and the random draws, not on what
the weights predict, so call counts and times measured with random weights are those of a
trained model of the same size. Counted: sequences (rows) passed to the network divided by
the number of samples, i.e. network calls per sequence; bp/s = samples x length / wall time.

    nice python bench/bench_sampling.py [--num-samples 16] [--length 1024] [--threads 2]
        [--checkpoint runs/x/checkpoints/last.ckpt] [--skip-ar] [--repeats 5]
        [--compare ancestral ancestral-4L cached first-hitting semi-ar]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable

import numba
import torch
from omegaconf import OmegaConf
from torch import nn

from genodiff.backbones import build
from genodiff.model import build_objective, complete_config
from genodiff.ops import training_path
from genodiff.ops.inference import cpu_chunk_rows
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import DNATokenizer

SAMPLERS = ("ancestral", "ancestral-4L", "cached", "first-hitting", "semi-ar")


class RowCounter(nn.Module):
    """Wraps a backbone and counts the sequences it is called on."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.rows = 0

    def forward(self, input_ids, sigma=None):
        self.rows += input_ids.shape[0]
        return self.backbone(input_ids, sigma)


def configured(model: dict, objective: dict) -> tuple[nn.Module, nn.Module]:
    """(backbone, objective) of a model / objective config, ids from the DNA tokenizer."""
    config = complete_config({"model": model, "objective": objective}, DNATokenizer())
    return build(**config["model"]), build_objective(config["objective"])


def caduceus_tiny(checkpoint: str | None) -> tuple[nn.Module, nn.Module]:
    """(backbone, MDLM objective)."""
    if checkpoint:
        from genodiff.checkpoints import load_model

        loaded = load_model(checkpoint)
        return loaded.eval_backbone, loaded.objective
    config = OmegaConf.load("configs/model/caduceus_tiny.yaml")
    base = OmegaConf.load("configs/model/caduceus_ph.yaml")
    merged = OmegaConf.merge(base, {k: v for k, v in config.items() if k != "defaults"})
    return configured(OmegaConf.to_container(merged), {"name": "mdlm"})


def mamba_matching(parameters: int) -> tuple[nn.Module, nn.Module]:
    """A causal Mamba LM (and the AR objective), d_model chosen so that its parameter count is
    closest to ``parameters``."""
    config = OmegaConf.to_container(OmegaConf.load("configs/model/mamba.yaml"))
    candidates = [
        configured({**config, "d_model": d, "n_layer": 2}, {"name": "ar"})
        for d in range(32, 129, 8)
    ]
    return min(candidates, key=lambda pair: abs(count(pair[0]) - parameters))


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def request_for(sampler: str, n: int, length: int) -> SampleRequest:
    if sampler == "ancestral-4L":
        return SampleRequest(n, length, steps=4 * length, sampler="ancestral")
    if sampler == "cached":
        return SampleRequest(n, length, steps=4 * length, sampler="cached")
    if sampler == "semi-ar":
        block, stride = max(2, length // 2), max(1, length // 4)
        return SampleRequest(n, length, steps=block, sampler=sampler, block=block, stride=stride)
    return SampleRequest(n, length, steps=length, sampler=sampler)


def timed(
    objective, model: nn.Module, request: SampleRequest, seed: int
) -> tuple[float, float, torch.Tensor]:
    """(seconds, network calls per sequence, samples) for one sampling run."""
    counter = RowCounter(model).eval()
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    with torch.no_grad():
        samples = objective.sample(counter, request, generator)
    seconds = time.perf_counter() - start
    assert samples.shape == (request.num_samples, request.length)
    return seconds, counter.rows / request.num_samples, samples


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@contextlib.contextmanager
def threads(count: int):
    """torch intra-op threads and numba threads set to ``count`` inside."""
    before = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(count)
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])


def network_costs(objective, backbone: nn.Module, n: int, length: int, repeats: int) -> None:
    """Bare forward vs the samplers' network call, both paths, and 1 -> 2 thread scaling."""
    ids = torch.full((n, length), objective.process.mask_id)
    t = torch.ones(n)

    def forward() -> object:
        return backbone(ids)

    def call() -> object:
        return objective.x0_log_probs(backbone, ids, t)

    def both() -> dict[str, float]:
        return {"bare": median_seconds(forward, repeats), "call": median_seconds(call, repeats)}

    with torch.no_grad():
        new = both()
        with training_path():
            old = both()
        scaling = {}
        for count_ in (1, 2):
            with threads(count_):
                scaling[count_] = median_seconds(forward, repeats)
    print(f"\nnetwork at {n} x {length} bp (median of {repeats}):")
    print("| path | bare forward (s) | network call (s) | call / bare |")
    print("|---|---|---|---|")
    for name, row in (("inference", new), ("training (before)", old)):
        ratio = row["call"] / row["bare"]
        print(f"| {name} | {row['bare']:.3f} | {row['call']:.3f} | {ratio:.2f} |")
    print(f"network call, training path / inference path: {old['call'] / new['call']:.2f}x")
    print(
        f"bare forward (inference path), 1 thread {scaling[1]:.3f} s, 2 threads "
        f"{scaling[2]:.3f} s: 1 -> 2 threads {scaling[1] / scaling[2]:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-samples", type=int, default=16)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=None, help="torch and numba threads")
    parser.add_argument("--checkpoint", default=None, help="MDLM checkpoint (default: random)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-ar", action="store_true")
    parser.add_argument(
        "--compare",
        nargs="*",
        choices=SAMPLERS,
        default=["cached", "first-hitting"],
        help="samplers also run on the training path (old), for the speed-up",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timings of one network call")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        numba.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    n, length = args.num_samples, args.length

    backbone, objective = caduceus_tiny(args.checkpoint)
    backbone.eval()
    with torch.no_grad():
        hidden = backbone.capabilities.hidden_size
        chunk = cpu_chunk_rows(torch.zeros(n, length), hidden, backbone)
    print(
        f"{n} x {length} bp, Caduceus {count(backbone):,} parameters, torch threads "
        f"{torch.get_num_threads()}, numba threads {numba.get_num_threads()}, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
        f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '(unset)')}, "
        f"inference-path chunks of {chunk} rows"
    )
    network_costs(objective, backbone, n, length, args.repeats)

    print(
        "\n| sampler | steps T | network calls / sequence | wall (s) | bp/s "
        "| wall before (s) | bp/s before | speed-up | same samples |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    walls = {}
    for sampler in SAMPLERS:
        request = request_for(sampler, n, length)
        seconds, calls, samples = timed(objective, backbone, request, args.seed)
        walls[sampler] = seconds
        bp_per_s = n * length / seconds
        row = f"| {sampler} | {request.steps} | {calls:.1f} | {seconds:.1f} | {bp_per_s:.1f} |"
        if sampler in args.compare:
            with training_path():
                before, _, old_samples = timed(objective, backbone, request, args.seed)
            same = "yes" if torch.equal(samples, old_samples) else "no"
            row += f" {before:.1f} | {n * length / before:.1f} | {before / seconds:.2f}x | {same} |"
        else:
            row += " - | - | - | - |"
        print(row, flush=True)
    if not args.skip_ar:
        mamba, ar = mamba_matching(count(backbone))
        mamba.eval()
        request = SampleRequest(n, length, sampler="ancestral")
        start = time.perf_counter()
        with torch.no_grad():  # not wrapped: the recurrent path needs the model's own step()
            ar.sample(mamba, request, torch.Generator().manual_seed(args.seed))
        seconds = time.perf_counter() - start
        print(
            f"| AR Mamba ({count(mamba):,} parameters) | - | {length} recurrent steps "
            f"| {seconds:.1f} | {n * length / seconds:.1f} | - | - | - | - |",
            flush=True,
        )
    speedup = walls["ancestral-4L"] / walls["cached"]
    print(f"cached vs ancestral at T = {4 * length}: {speedup:.2f}x faster")


if __name__ == "__main__":
    main()
