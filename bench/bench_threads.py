"""CPU time of a training step on an idle and on a loaded machine, per thread setting, in one run.

The demo's training step (configs/demo.yaml: Caduceus-Ph d64 x 2, MDLM, 16 x 1,024 bp,
forward + backward + AdamW) runs in a fresh process per row, so that each row's OpenMP
runtimes start with that row's environment (``OMP_WAIT_POLICY`` is read once, when torch and
numba load their OpenMP libraries). Each row times ``--steps`` steps after ``--warmup``
untimed ones (numba's kernels load from their cache there) and reports the process's CPU
seconds and wall seconds per step.

Rows: the step with one thread (``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1``, the reference), with
the thread pools as torch and numba leave them (``GENODIFF_THREADS=system``: every core,
OpenMP's default spinning), with genodiff's short spinning on every core (what a run gets when
the load comes after it started), and genodiff's default (``genodiff.threads``: short spinning,
as many threads as cores are free at the start). Each runs on the idle machine and again beside
a load: a PyTorch convolution loop with torch's default threads and environment (another
user's job; it spins in OpenMP barriers as PyTorch does by default), started before the row
and stopped after it. The ratio column is CPU seconds per step over the idle one-thread row's.

    python bench/bench_threads.py [--steps 6] [--warmup 2] [--load-threads 0 (= cores)]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = {
    "one thread": {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "GENODIFF_THREADS": "1"},
    "torch/OpenMP defaults": {"GENODIFF_THREADS": "system"},
    "genodiff, every core": {"GENODIFF_THREADS": str(os.cpu_count())},
    "genodiff default": {},
}

LOAD_LOOP = """
import torch
conv = torch.nn.Conv1d(64, 64, 9, padding=4)
x = torch.randn(8, 64, 4096)
while True:
    conv(x).square().mean().backward()
"""


def step_worker(steps: int, warmup: int) -> None:
    """Run in a fresh process: time the demo's training step; print one JSON line."""
    import genodiff  # noqa: F401  (before torch: OpenMP reads how to wait when it loads)

    # isort: split
    import torch

    from genodiff.backbones import build
    from genodiff.config import load_config
    from genodiff.model import build_objective, complete_config
    from genodiff.threads import configure_threads
    from genodiff.tokenizers import DNATokenizer

    configure_threads()
    cfg = load_config(ROOT / "configs" / "demo.yaml")
    sections = {"model": dict(cfg.model), "objective": dict(cfg.objective)}
    config = complete_config(sections, DNATokenizer())
    backbone, objective = build(**config["model"]), build_objective(config["objective"])
    optimizer = torch.optim.AdamW(backbone.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(7, 11, (int(cfg.data.batch_size), 1024), generator=generator)  # (B, L)

    def step() -> None:
        nelbo, tokens = objective.loss(backbone, ids, generator)
        (nelbo.sum() / tokens.sum()).backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(warmup):
        step()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    threads = torch.get_num_threads()
    spin = os.environ.get("GOMP_SPINCOUNT", "default")
    print(json.dumps({"cpu": cpu / steps, "wall": wall / steps, "threads": threads, "spin": spin}))


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment less every thread setting, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OMP_", "NUMBA_NUM", "MKL_NUM", "GOMP_", "GENODIFF_THREADS"))
    }
    return {**env, **extra}


def run_row(setting: dict[str, str], steps: int, warmup: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", "--steps", str(steps), "--warmup", str(warmup)]
    done = subprocess.run(
        command, env=clean_env(setting), capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_load(threads: int) -> subprocess.Popen:
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    load = subprocess.Popen([sys.executable, "-c", LOAD_LOOP], env=clean_env(extra))
    time.sleep(3.0)  # torch imported, the loop running
    return load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--load-threads", type=int, default=0, help="0: torch's default")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        step_worker(args.steps, args.warmup)
        return
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the run")
    rows = []
    for machine in ("idle", "loaded"):
        for name, setting in SETTINGS.items():
            load = start_load(args.load_threads) if machine == "loaded" else None
            try:
                result = run_row(setting, args.steps, args.warmup)
            finally:
                if load is not None:
                    load.kill()
                    load.wait()
            rows.append((machine, name, result))
            print(f"  {machine:6s} {name:22s} {result}", flush=True)
    reference = rows[0][2]["cpu"]
    print("\n| machine | setting | threads | GOMP_SPINCOUNT | CPU s / step | wall s / step "
          "| CPU vs 1 thread idle |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for machine, name, r in rows:
        print(
            f"| {machine} | {name} | {r['threads']} | {r['spin']} | {r['cpu']:.2f} "
            f"| {r['wall']:.2f} | {r['cpu'] / reference:.2f}x |"
        )


if __name__ == "__main__":
    main()
