"""One ancestral sampling step of the shipped ``mdlm-chrx`` on the CPU: where the time goes, and
the inference kernels with 512-bit vectors against LLVM's own width, in one process.

A step is one network call on every row (8 x 1,024 bp by default) and the sampler's arithmetic.
Printed:

- the step's parts (cProfile's own time per function, the largest first; numba kernels count
  as one call each) and the minor page faults per step;
- the step with the inference kernels as genodiff compiles them (``_prefer_wide_vectors``:
  512-bit vectors where the CPU has AVX-512) against the same kernels compiled with LLVM's own
  choice (``with_default_vectors``; 256-bit on recent Intel server CPUs), alternating, the
  median of ``--repeats`` each, and whether both drew the same sequences (same seed). With
  ``--threads 1`` the times are the process's CPU time, which other jobs on a shared machine
  disturb less than wall time;
- the step with the network's temporaries in buffers reused over the steps (as
  ``genodiff.generate`` runs a sampler: inside ``reused_buffers``) against the same step with
  them allocated afresh, alternating: minor page faults, system time and time per step (medians
  of ``--repeats``), and whether both drew the same sequences.

``--compare`` picks the comparisons (default both).

    python bench/bench_cpu_sampling_step.py [--threads 2] [--steps 3] [--repeats 7]
        [--compare vectors|buffers|both]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import resource
import statistics
import time

import numba
import torch

import genodiff
from genodiff import generate
from genodiff.ops import _scan_cpu

KERNELS = ("_mixer_scan_kernel", "_mixer_conv_kernel")


def profile(model, num_samples: int, length: int, steps: int, clock) -> None:
    """The parts of a step, percent of the profiled time, and the page faults per step."""
    calls = steps + 1  # the final noise removal is a network call too
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    profiler = cProfile.Profile(clock)
    profiler.runcall(model.generate, num_samples, length=length, steps=steps, seed=0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    stats = pstats.Stats(profiler)
    total = stats.total_tt
    print(f"profiled: {total / calls:.3f} s per step, {faults / calls:.0f} minor page faults")
    print("| part | share | s per step |\n|---|---:|---:|")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]
    for (path, line, name), (_, _, own, _, _) in rows:
        where = f"{path.rsplit('/', 1)[-1]}:{line} {name}" if line else name
        print(f"| {where} | {100 * own / total:.1f}% | {own / calls:.4f} |")


def compare(model, num_samples: int, length: int, steps: int, repeats: int, clock) -> None:
    """Wide against default-width kernels, alternating; same samples?"""
    variants = {
        "512-bit": {name: getattr(_scan_cpu, name) for name in KERNELS},
        "LLVM default": {
            name: _scan_cpu.with_default_vectors(getattr(_scan_cpu, name)) for name in KERNELS
        },
    }

    def draw(variant: str) -> tuple[torch.Tensor, float]:
        for name, kernel in variants[variant].items():
            setattr(_scan_cpu, name, kernel)
        start = clock()
        ids = model.generate(num_samples, length=length, steps=steps, seed=0).ids
        return ids, (clock() - start) / (steps + 1)

    try:
        drawn = {variant: draw(variant)[0] for variant in variants}  # compiles both
        times = {variant: [] for variant in variants}
        for i in range(repeats):
            for variant in variants if i % 2 == 0 else reversed(variants):
                times[variant].append(draw(variant)[1])
    finally:
        for name, kernel in variants["512-bit"].items():
            setattr(_scan_cpu, name, kernel)
    wide, default = (statistics.median(times[v]) for v in variants)
    same = torch.equal(*drawn.values())
    print(f"step, median of {repeats}: 512-bit {wide:.3f} s, LLVM default {default:.3f} s")
    print(f"LLVM default / 512-bit: {default / wide:.2f}x; same samples: {same}")


def compare_buffers(model, num_samples: int, length: int, steps: int, repeats: int, clock) -> None:
    """Reused against freshly allocated temporaries, alternating: faults, system time and
    time per step; same samples?"""
    reused = generate.reused_buffers

    def draw(variant: str) -> tuple[torch.Tensor, tuple[float, float, float]]:
        generate.reused_buffers = reused if variant == "reused" else contextlib.nullcontext
        before, start = resource.getrusage(resource.RUSAGE_SELF), clock()
        ids = model.generate(num_samples, length=length, steps=steps, seed=0).ids
        seconds, after = clock() - start, resource.getrusage(resource.RUSAGE_SELF)
        per_step = (after.ru_minflt - before.ru_minflt, after.ru_stime - before.ru_stime, seconds)
        return ids, tuple(x / (steps + 1) for x in per_step)

    variants = ("fresh", "reused")
    try:
        drawn = {variant: draw(variant)[0] for variant in variants}
        measured = {variant: [] for variant in variants}
        for i in range(repeats):
            for variant in variants if i % 2 == 0 else reversed(variants):
                measured[variant].append(draw(variant)[1])
    finally:
        generate.reused_buffers = reused
    print(f"step, median of {repeats}:")
    print("| temporaries | minor faults | system s | s |\n|---|---:|---:|---:|")
    for variant in variants:
        faults, system, seconds = (
            statistics.median(x) for x in zip(*measured[variant], strict=True)
        )
        print(f"| {variant} | {faults:.0f} | {system:.4f} | {seconds:.3f} |")
    print(f"same samples: {torch.equal(*drawn.values())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--num-samples", type=int, default=8)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--compare", choices=("vectors", "buffers", "both"), default="both")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.threads == 1 else time.perf_counter
    model = genodiff.load("mdlm-chrx")
    model.generate(1, length=64, steps=1, seed=0)  # compiles the kernels, if not cached
    print(
        f"mdlm-chrx, {args.num_samples} x {args.length} bp, torch threads "
        f"{torch.get_num_threads()}, numba threads {numba.get_num_threads()}, "
        f"{'CPU' if args.threads == 1 else 'wall'} time"
    )
    sizes = (args.num_samples, args.length, args.steps)
    profile(model, *sizes, clock)
    if args.compare in ("vectors", "both"):
        compare(model, *sizes, args.repeats, clock)
    if args.compare in ("buffers", "both"):
        compare_buffers(model, *sizes, args.repeats, clock)


if __name__ == "__main__":
    main()
