"""GPU sampler throughput: bp/s of the MDLM samplers eager and with each whole step replayed from
a CUDA graph, in one process on one GPU (genodiff issue 35, "A GPU sampler near the hardware").

For each number of rows (default 16, 64, 256 and 1,024) x ``--length`` bp (1,024), the ancestral
sampler with T = ``--steps`` (1,024) and the first-hitting sampler draw one batch through
``Model.generate`` (what ``genodiff sample`` runs: per-sequence noise, ``batch_size`` = rows):

- ``eager``: the step as the device runs it without graphs (on CUDA the sync-free step,
  ``genodiff.samplers.masked.unmask_sync_free``; on the CPU the sparse step);
- ``graphed``: ``Model.enable_cuda_graphs()``, each whole step (network and sampler arithmetic)
  replayed from one CUDA graph (CUDA only: on the CPU the row says so).

Every graphed draw is compared with the eager one (the same sequences are expected in float32).
Each timed draw follows an untimed one of the same shapes (T = 2, or all but two positions given
for first-hitting) that records the graphs and warms the kernels, so recording is not timed.
``--masked N``: first-hitting draws only the last N positions of each sequence (the others are
given, a prefix): N calls of the same full-length windows, each drawing one position a row, so
its bp/s (of the rows x N positions drawn) is a full draw's, in N / L of the time (1,024 rows:
a full draw's 1,024 calls take minutes).

Achieved FLOP/s estimate the network's arithmetic only: forward FLOPs = 2 x P x the tokens the
network was called on (P = the backbone's parameters; a lower bound for Caduceus, whose
weight-tied reverse pass runs the mixer a second time, and the selective scan's own work is not
counted). The calls and their tokens are counted in the eager draw (a hook on the backbone):
T steps (ancestral) or one per drawn position (first-hitting), each on rows x L tokens, then
the final noise removal on the rows that still hold a mask (at T = L = 1,024 nearly always
some); the graphed draw makes the same calls (it draws the same sequences). The share of the
card is that over the card's dense peak for the dtype (``PEAK_FLOPS``, or ``--peak-tflops``).
"host draws" is the CPU's time to draw one ancestral step's uniforms for the rows
(per-sequence streams, mt19937): a step cannot be faster than that.

The model: ``--checkpoint`` (any genodiff checkpoint or export), else a randomly initialised
Caduceus-Ph d118 x 4 (configs/model/caduceus_ph.yaml, the model of configs/hg38.yaml; how fast a
sampler runs does not depend on its weights). ``--smoke``: tiny sizes on any device (CI).
Writes ``bench_gpu_sampler.json`` and ``bench_gpu_sampler.md`` to ``--out``.

    python bench/bench_gpu_sampler.py --out bench_runs/gpu_sampler [--rows 16 64 256 1024]
        [--length 1024] [--steps 1024] [--samplers ancestral first-hitting]
        [--dtype float32] [--checkpoint PATH] [--device cuda] [--profile ROWS] [--masked N]
        [--smoke]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import genodiff  # noqa: E402
from genodiff.model import GenerativeModel  # noqa: E402
from genodiff.ops import upstream  # noqa: E402
from genodiff.pipeline import Model  # noqa: E402
from genodiff.randomness.noise import Noise  # noqa: E402

#: Dense peak FLOP/s by card and dtype (NVIDIA's data sheets; float32 without TF32, which
#: PyTorch leaves off for matmuls): the first name found in ``torch.cuda.get_device_name()``.
PEAK_FLOPS = {
    "H100 PCIe": {"float32": 51e12, "bfloat16": 756e12},
    "H100": {"float32": 67e12, "bfloat16": 989e12},  # SXM
    "H200": {"float32": 67e12, "bfloat16": 989e12},
    "A100": {"float32": 19.5e12, "bfloat16": 312e12},
}
SAMPLERS = ("ancestral", "first-hitting")
SMOKE = {"rows": [2], "length": 12, "steps": 3}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for the JSON and markdown tables")
    parser.add_argument("--rows", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--length", type=int, default=1024, help="bp per sequence")
    parser.add_argument("--steps", type=int, default=1024, help="T of the ancestral sampler")
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS))
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--checkpoint", help="a genodiff checkpoint (default: random weights)")
    parser.add_argument("--device", help="default: cuda where available, else cpu")
    parser.add_argument("--peak-tflops", type=float, help="the card's peak for --dtype")
    parser.add_argument(
        "--masked",
        type=int,
        metavar="N",
        help="first-hitting draws the last N positions only, the rest given (module doc)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--profile",
        type=int,
        metavar="ROWS",
        help="also profile a few eager ancestral steps at ROWS rows: profile.txt, time by op",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes and model, any device (CI)"
    )
    return parser.parse_args(argv)


def mixer_kernels(device: torch.device) -> str:
    """Which code a Mamba mixer runs on ``device`` (``genodiff.ops.upstream``'s rule): the
    numbers mean little without it."""
    probe = torch.zeros(1, device=device)
    if upstream.upstream(upstream.SELECTIVE_SCAN, probe) is None:
        return "genodiff's exact path (no mamba-ssm kernels for this device)"
    scan = f"mamba-ssm {version_of('mamba_ssm')}"
    if upstream.upstream(upstream.CAUSAL_CONV1D, probe) is None:
        return f"{scan} selective_scan_fn, the short convolution in PyTorch (no causal-conv1d)"
    return f"{scan} mamba_inner_fn with causal-conv1d {version_of('causal_conv1d')}"


def version_of(module: str) -> str:
    return getattr(importlib.import_module(module), "__version__", "(no version)")


def device_of(args: argparse.Namespace) -> torch.device:
    """``--device``, else CUDA where available, else the CPU."""
    return torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def build_model(args: argparse.Namespace, device: torch.device) -> Model:
    """``--checkpoint``, else a random Caduceus-Ph d118 x 4 (``--smoke``: d16 x 1), on
    ``device`` in ``--dtype``."""
    dtype = getattr(torch, args.dtype)
    if args.checkpoint is not None:
        return genodiff.load(args.checkpoint, device).to(dtype=dtype)
    torch.manual_seed(args.seed)
    section = OmegaConf.to_container(OmegaConf.load(ROOT / "configs/model/caduceus_ph.yaml"))
    if args.smoke:
        section.update(d_model=16, n_layer=1, fused_add_norm=False)
    config = {
        "model": section,
        "objective": {"name": "mdlm"},
        "data": {"name": "fasta", "max_length": args.length},
        "ema": {"decay": 0},
    }
    return Model(GenerativeModel(config), "random Caduceus-Ph").to(device, dtype=dtype)


def forward_flops(parameters: int, tokens: int) -> int:
    """The network's forward FLOPs on ``tokens`` tokens: 2 x parameters x tokens."""
    return 2 * parameters * tokens


def drawn_positions(sampler: str, length: int, masked: int | None) -> int:
    """Positions of a sequence one timed draw draws: L, or ``--masked`` N for first-hitting."""
    return length if sampler == "ancestral" or masked is None else masked


class CallCounter:
    """Counts the calls of ``module`` inside its context, and the tokens (rows x length of
    the first input) they were made on."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module, self.calls, self.tokens = module, 0, 0

    def __enter__(self) -> CallCounter:
        self.hook = self.module.register_forward_hook(self.count)
        return self

    def __exit__(self, *exc: object) -> None:
        self.hook.remove()

    def count(self, module: torch.nn.Module, inputs: tuple, output: object) -> None:
        self.calls += 1
        self.tokens += inputs[0].shape[0] * inputs[0].shape[1]  # ids (B, L)


def peak_flops(device: torch.device, dtype: str, given_tflops: float | None) -> float | None:
    """The card's dense peak for ``dtype``: ``--peak-tflops``, else ``PEAK_FLOPS``; None for a
    CPU or an unknown card."""
    if given_tflops is not None:
        return given_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peaks[dtype] for card, peaks in PEAK_FLOPS.items() if card in name), None)


def host_draw_seconds(rows: int, length: int, repeats: int = 8) -> float:
    """Seconds the CPU takes to draw one ancestral step's uniforms for ``rows`` sequences
    ((rows, 2, length) float64 from per-sequence streams): the floor of a step's time when
    the device is faster than the host."""
    noise = Noise.per_sequence(0, range(rows), "cpu")
    start = time.perf_counter()
    for _ in range(repeats):
        noise.uniform(rows, 2, length)
    return (time.perf_counter() - start) / repeats


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def draw(model: Model, sampler: str, rows: int, args: argparse.Namespace, warm: bool) -> Any:
    """One batch of ``rows`` sequences (``warm``: the untimed draw of the same shapes)."""
    options: dict[str, Any] = {"sampler": sampler, "seed": args.seed, "batch_size": rows}
    if sampler == "ancestral":
        options["steps"] = 2 if warm else args.steps
    else:  # warm: every position but the last two given, two iterations of the same shapes
        drawn = 2 if warm else drawn_positions(sampler, args.length, args.masked)
        if drawn < args.length:
            options["prefix"] = "A" * (args.length - drawn)
    return model.generate(rows, args.length, **options)


def measure(
    model: Model, sampler: str, rows: int, args: argparse.Namespace, counter: CallCounter
) -> tuple[float, Any]:
    """(seconds, samples) of one timed draw after its warm-up; ``counter`` counts the timed
    draw's network calls (a CUDA graph's replays are not calls: none are counted then)."""
    draw(model, sampler, rows, args, warm=True)
    synchronize(model.device)
    with counter:
        start = time.perf_counter()
        samples = draw(model, sampler, rows, args, warm=False)
        synchronize(model.device)
        seconds = time.perf_counter() - start
    return seconds, samples


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every (rows, sampler, mode) measurement, as the JSON object written."""
    if args.smoke:
        args.rows, args.length, args.steps = SMOKE["rows"], SMOKE["length"], SMOKE["steps"]
    device = device_of(args)
    parameters = sum(
        p.numel() for p in build_model(args, device).network.eval_backbone.parameters()
    )
    peak = peak_flops(device, args.dtype, args.peak_tflops)
    results = []
    host_draws = {rows: host_draw_seconds(rows, args.length) for rows in args.rows}
    for rows in args.rows:
        for sampler in args.samplers:
            eager, calls = None, None
            for mode in ("eager", "graphed"):
                row: dict[str, Any] = {"rows": rows, "length": args.length, "sampler": sampler}
                row.update(mode=mode, steps=args.steps if sampler == "ancestral" else None)
                drawn = drawn_positions(sampler, args.length, args.masked)
                row["drawn"] = drawn
                row["host_draw_ms_per_step"] = 1e3 * host_draws[rows]
                results.append(row)
                if mode == "graphed" and device.type != "cuda":
                    row["skipped"] = "CUDA graphs need a CUDA device"
                    continue
                model = build_model(args, device)  # fresh: no earlier graphs
                if mode == "graphed":
                    model.enable_cuda_graphs()
                counted = CallCounter(model.network.eval_backbone)
                seconds, samples = measure(model, sampler, rows, args, counted)
                calls = counted if mode == "eager" else calls  # graphed: the eager draw's calls
                row.update(network_calls=calls.calls, network_tokens=calls.tokens)
                flops = forward_flops(parameters, calls.tokens)
                row.update(seconds=seconds, bp_per_s=rows * drawn / seconds)
                row.update(flop_per_s=flops / seconds)
                row["peak_share"] = None if peak is None else flops / seconds / peak
                if mode == "eager":
                    eager = samples
                else:
                    row["same_as_eager"] = list(samples) == list(eager)
                del model
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "dtype": args.dtype,
        "model": args.checkpoint or "random Caduceus-Ph" + (" (smoke: d16 x 1)" * args.smoke),
        "parameters": parameters,
        "mixer_kernels": mixer_kernels(device),
        "peak_flop_per_s": peak,
        "flops_formula": "2 x parameters x the tokens of the eager draw's network calls "
        "(rows x length a call; the final noise removal on the rows holding a mask)",
        "results": results,
    }


PROFILED_STEPS = 8  # ancestral steps of the profiled draw: enough to average, quick to read


def profile(args: argparse.Namespace) -> str:
    """The time of each op (and, on CUDA, each kernel) over one eager ancestral draw of
    ``PROFILED_STEPS`` steps at ``--profile`` rows, after a warm-up draw: which work a step's
    time goes to (the selective scan, the projections, the sampler's arithmetic)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    device = device_of(args)
    model = build_model(args, device)
    options = {"sampler": "ancestral", "steps": PROFILED_STEPS, "seed": args.seed}
    options["batch_size"] = args.profile
    model.generate(args.profile, args.length, **options)  # warm: kernels chosen, memory held
    synchronize(device)
    activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * (device.type == "cuda")
    with profiler(activities=activities) as recorded:
        model.generate(args.profile, args.length, **options)
        synchronize(device)
    order = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    heading = (
        f"{args.profile} rows x {args.length} bp, ancestral, {PROFILED_STEPS} steps "
        f"({PROFILED_STEPS + 1} network calls), {args.dtype}, {device}, eager; by {order}\n"
    )
    return heading + recorded.key_averages().table(sort_by=order, row_limit=30)


def markdown(report: dict[str, Any]) -> str:
    """The results as a markdown table, with the setting above it."""
    lines = [
        f"{report['device']}, torch {report['torch']}, {report['dtype']}, {report['model']} "
        f"({report['parameters']:,} parameters); mixers: {report['mixer_kernels']}; "
        f"FLOPs: {report['flops_formula']}",
        "",
        "| rows x bp | sampler | T | step | bp/s | wall (s) | network calls | FLOP/s | "
        "share of peak | same as eager | host draws (ms a step) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        drawn = f" (the last {r['drawn']} drawn)" if r["drawn"] < r["length"] else ""
        head = f"| {r['rows']} x {r['length']}{drawn} | {r['sampler']} | {r['steps'] or '-'} | "
        head += r["mode"]
        if "skipped" in r:
            lines.append(f"{head} | {r['skipped']} | | | | | | |")
            continue
        share = "-" if r["peak_share"] is None else f"{100 * r['peak_share']:.2f}%"
        same = {True: "yes", False: "NO"}.get(r.get("same_as_eager"), "-")
        lines.append(
            f"{head} | {r['bp_per_s']:,.0f} | {r['seconds']:.2f} | {r['network_calls']:,} | "
            f"{r['flop_per_s']:.3g} | "
            f"{share} | {same} | {r['host_draw_ms_per_step']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_gpu_sampler.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (out / "bench_gpu_sampler.md").write_text(table)
    print(table)
    if args.profile is not None:
        (out / "profile.txt").write_text(profile(args))
        print(f"wrote {out / 'profile.txt'}")
    different = [r for r in report["results"] if r.get("same_as_eager") is False]
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
