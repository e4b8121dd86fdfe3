"""Peak memory of the selective scan, forward + backward, fp32: genodiff vs the reference
(``scan_materialised`` in bench_selective_scan.py, which builds two (B, D, L, N) tensors).

Each (variant, L) runs in a fresh subprocess: inputs are built and the variant is warmed up at
L=64 (numba compiles or loads its cache), then the resident set size is read and one forward
(+ backward) is run; the reported number is ru_maxrss after minus the resident size before.
A run that passes --limit seconds is stopped by a watchdog that reports the peak so far, a
lower bound (marked ">=").

    python bench/bench_scan_memory.py [--threads 1] [--lengths 1024 4096] [--limit 180]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time

MIB = 2**20


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def child(args: argparse.Namespace) -> None:
    if args.variant == "fallback":
        os.environ["GENODIFF_DISABLE_NUMBA"] = "1"
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_selective_scan import inputs, scan_genodiff, scan_materialised

    torch.set_num_threads(args.threads)
    fn = scan_materialised if args.variant == "reference" else scan_genodiff

    def once(x):
        out = fn(**x)
        if args.backward:
            out.sum().backward()

    once(inputs(2, 256, 64, 16, grad=args.backward))  # warm-up
    x = inputs(2, 256, args.L, 16, grad=args.backward)
    before = rss_bytes()
    start = time.perf_counter()

    def report(done: bool) -> None:
        peak = maxrss_bytes() - before
        seconds = time.perf_counter() - start
        print(json.dumps({"peak": peak, "seconds": seconds, "done": done}), flush=True)
        os._exit(0)

    watchdog = threading.Timer(args.limit, report, (False,))
    watchdog.daemon = True
    watchdog.start()
    once(x)
    watchdog.cancel()
    report(True)


def measure(variant: str, L: int, backward: bool, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--variant", variant]
    cmd += ["--L", str(L), "--threads", str(args.threads), "--limit", str(args.limit)]
    cmd += ["--backward"] if backward else []
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(r: dict) -> str:
    mark = "" if r["done"] else ">="
    return f"{mark}{r['peak'] / MIB:.1f} MiB ({mark}{r['seconds']:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--limit", type=float, default=180.0, help="seconds per run")
    parser.add_argument("--repeats", type=int, default=2, help="fresh processes per cell")
    parser.add_argument("--fallback", action="store_true", help="also the PyTorch fallback")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="genodiff", help=argparse.SUPPRESS)
    parser.add_argument("--L", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    variants = ["genodiff", "reference"] + (["fallback"] if args.fallback else [])
    print(f"threads={args.threads}  B=2 D=256 N=16 fp32; peak RSS increase, min of {args.repeats}")
    print(f"{'L':>6} {'pass':<17}" + "".join(f"{v:>28}" for v in variants) + f"{'ref/ours':>10}")
    for L in args.lengths:
        for backward in (False, True):
            best = {}
            for v in variants:
                # the reference's backward is slow and deterministic in memory: run it once
                n = 1 if (v == "reference" and backward) else args.repeats
                runs = [measure(v, L, backward, args) for _ in range(n)]
                best[v] = min(runs, key=lambda r: r["peak"])
            ratio = best["reference"]["peak"] / max(best["genodiff"]["peak"], 1)
            mark = "" if best["reference"]["done"] else ">="
            label = "forward+backward" if backward else "forward (no grad)"
            cells = "".join(f"{fmt(best[v]):>28}" for v in variants)
            print(f"{L:>6} {label:<17}{cells}{mark + f'{ratio:.1f}x':>10}", flush=True)


if __name__ == "__main__":
    main()
