"""GPU throughput of the paper's Caduceus-Ph (configs/model/caduceus_ph.yaml: d_model 118 x 4
layers) with the mamba-ssm / causal-conv1d kernels.

1. Training: MDLM steps (forward, backward, AdamW) on B x L random DNA windows (default the
   paper's 128 x 1,024 bp) in bf16 autocast, for the fused path (mamba_inner_fn + the Triton
   fused add + RMSNorm: use_fast_path and fused_add_norm) and the unfused path (separate
   causal_conv1d_fn and selective_scan_fn kernels, PyTorch add + norm), interleaved in one run.
   Reported: tokens/s (median over the timed steps) and peak GPU memory.
2. Sampling: bp/s of the MDLM samplers (ancestral, cached, first-hitting; random weights: when
   tokens unmask does not depend on them) in float32 as ``genodiff sample`` runs, and of an AR
   Mamba (configs/model/mamba.yaml) decoding with the recurrent step kernels; each eagerly and
   with CUDA graphs (``genodiff.backbones.graphed``, what ``genodiff sample --cuda-graphs``
   does: the MDLM samplers' whole step, the AR model's network call), and whether both drew
   the same sequences (bench/bench_gpu_sampler.py measures the sampler alone at 16 to 1,024
   rows); one row
   samples a 2-class model with D-CFG (gamma 2, T = 256), whose label and null parts are one
   network call of twice the rows.

Needs a CUDA GPU and the kernels (pip install --no-build-isolation -e '.[cuda]'); elsewhere it
says so and exits with status 1. With mamba-ssm but without causal-conv1d (mamba_inner_fn needs
it) the training table has one row, the path such a machine trains on (mamba-ssm's
selective_scan_fn with the short convolution in PyTorch, the fused add + RMSNorm), and
sampling runs with the convolution in PyTorch too.

    python bench/bench_gpu.py [--batch 128] [--length 1024] [--steps 20] [--warmup 3]
        [--sample-num 16] [--sample-length 1024] [--sample-steps 1024] [--skip-sampling]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import torch
from omegaconf import OmegaConf

from genodiff.backbones import build
from genodiff.backbones.graphed import GraphedNetwork
from genodiff.guidance import Guidance
from genodiff.ops import upstream
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import DNATokenizer

MIB = 2**20
T = TypeVar("T")
DNA = DNATokenizer()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=128, help="training windows per step")
    parser.add_argument("--length", type=int, default=1024, help="training window (bp)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per path")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (autotune)")
    parser.add_argument("--sample-num", type=int, default=16)
    parser.add_argument("--sample-length", type=int, default=1024)
    parser.add_argument("--sample-steps", type=int, default=1024, help="T of the ancestral sampler")
    parser.add_argument("--skip-sampling", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def missing_requirement() -> str | None:
    """Why this benchmark cannot run here, or None."""
    if not torch.cuda.is_available():
        return (
            "bench_gpu.py needs a CUDA GPU (torch.cuda.is_available() is False); nothing measured"
        )
    kernels = (upstream.SELECTIVE_SCAN, upstream.LAYER_NORM, upstream.SELECTIVE_STATE_UPDATE)
    if not kernels_present(kernels):
        return (
            "bench_gpu.py needs mamba-ssm and causal-conv1d with their CUDA kernels: "
            "pip install --no-build-isolation -e '.[cuda]'"
        )
    return None


def kernels_present(kernels: tuple[tuple[str, str], ...]) -> bool:
    probe = torch.zeros(1, device="cuda")
    return all(upstream.upstream(kernel, probe) is not None for kernel in kernels)


def model_config(name: str, **overrides: object) -> dict:
    config = OmegaConf.to_container(OmegaConf.load(f"configs/model/{name}.yaml"))
    config.update(vocab_size=DNA.vocab_size, **overrides)
    return config


def caduceus_ph(fused: bool) -> torch.nn.Module:
    config = model_config("caduceus_ph", fused_add_norm=fused)
    config["ssm_cfg"] = {**config["ssm_cfg"], "use_fast_path": fused}
    return build(**config).cuda()


def synced(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds of one call, GPU work included, and what it returned."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


def training_step(model: torch.nn.Module, batch: int, length: int) -> Callable[[], None]:
    from genodiff.objectives import MDLM

    objective = MDLM(mask_id=DNA.mask_id, pad_id=DNA.pad_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(7, 11, (batch, length), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            nelbo, tokens = objective.loss(model, ids)
            loss = nelbo.sum() / tokens.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def bench_training(args: argparse.Namespace) -> None:
    print(f"Training: Caduceus-Ph d118 x 4, MDLM, {args.batch} x {args.length} bp, bf16 autocast")
    print("| path | tokens/s (median) | step (ms) | peak memory (MiB) |")
    print("|---|---|---|---|")
    paths = training_paths()
    steps = {name: training_step(model, args.batch, args.length) for name, model in paths.items()}
    times: dict[str, list[float]] = {name: [] for name in paths}
    peaks = {}
    for name, step in steps.items():
        for _ in range(args.warmup):
            step()
        torch.cuda.reset_peak_memory_stats()
        times[name].append(synced(step)[0])
        peaks[name] = torch.cuda.max_memory_allocated() / MIB
    for _ in range(args.steps - 1):  # interleaved, so that clocks and neighbours affect both
        for name, step in steps.items():
            times[name].append(synced(step)[0])
    tokens = args.batch * args.length
    for name in paths:
        seconds = statistics.median(times[name])
        print(f"| {name} | {tokens / seconds:,.0f} | {1e3 * seconds:.1f} | {peaks[name]:,.0f} |")
    if "unfused" in paths:
        ratio = statistics.median(times["unfused"]) / statistics.median(times["fused"])
        print(f"fused vs unfused: {ratio:.2f}x the throughput")


def training_paths() -> dict[str, torch.nn.Module]:
    """The training paths to time: fused against unfused where causal-conv1d is installed
    (mamba_inner_fn needs it), else the one path the machine trains on."""
    if kernels_present((upstream.CAUSAL_CONV1D, upstream.MAMBA_INNER)):
        return {"fused": caduceus_ph(True), "unfused": caduceus_ph(False)}
    return {"selective_scan_fn, convolution in PyTorch (no causal-conv1d)": caduceus_ph(True)}


def bench_sampling(args: argparse.Namespace) -> None:
    from genodiff.objectives import MDLM
    from genodiff.objectives.ar import AR

    n, length = args.sample_num, args.sample_length
    print(f"\nSampling: {n} x {length} bp, float32, random weights")
    print("| model | sampler | steps T | network call | bp/s | wall time (s) | same sequences |")
    print("|---|---|---|---|---|---|---|")
    mdlm = MDLM(mask_id=DNA.mask_id, pad_id=DNA.pad_id, sample_ids=DNA.sample_ids)
    ar = AR(bos_id=DNA.bos_id, pad_id=DNA.pad_id, sample_ids=DNA.sample_ids)
    caduceus = caduceus_ph(True).eval()
    labelled = build(**model_config("caduceus_ph", num_classes=2)).cuda().eval()
    d_cfg = Guidance(label=1, gamma=2.0)  # the label and null parts: one call of 2n rows
    ar_mamba = build(**model_config("mamba")).cuda().eval()
    runs = [
        ("Caduceus-Ph", caduceus, mdlm, "ancestral", args.sample_steps, None),
        ("Caduceus-Ph", caduceus, mdlm, "cached", args.sample_steps, None),
        ("Caduceus-Ph", caduceus, mdlm, "first-hitting", None, None),
        ("Caduceus-Ph, 2 classes, D-CFG gamma 2", labelled, mdlm, "ancestral", 256, d_cfg),
        ("AR Mamba d128 x 4", ar_mamba, ar, "ancestral", None, None),
    ]
    for label, model, objective, sampler, steps, guidance in runs:
        request = SampleRequest(n, length, steps=steps or 1, sampler=sampler, guidance=guidance)
        # untimed: a short eager draw of the same shapes (Triton's compile and autotune)
        warm_up = SampleRequest(n, length, steps=2, sampler=sampler, guidance=guidance)
        objective.sample(model, warm_up, torch.Generator(device="cuda").manual_seed(args.seed))
        drawn = {}
        # eager, then the same draw with each step's call replayed from a CUDA graph (the AR
        # model decodes with its recurrent step, which the graphs leave as it is)
        for call, network in (("eager", model), ("CUDA graph", GraphedNetwork(model))):
            generator = torch.Generator(device="cuda").manual_seed(args.seed)
            draw = functools.partial(objective.sample, network, request, generator)
            try:
                seconds, drawn[call] = synced(draw)
            except RuntimeError as err:  # one failed row must not cost the others
                print(f"| {label} | {sampler} | {steps or '-'} | {call} | failed: {err} |")
                continue
            compared = call != "eager" and "eager" in drawn
            same = str(torch.equal(drawn["eager"], drawn[call])) if compared else "-"
            print(
                f"| {label} | {sampler} | {steps or '-'} | {call} | {n * length / seconds:,.0f} "
                f"| {seconds:.1f} | {same} |"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = missing_requirement()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    bench_training(args)
    if not args.skip_sampling:
        bench_sampling(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
