"""Sampling and fine-tuning at scale on the CPU, each measurement in fresh processes:

1. ``memory``: peak resident memory of ``genodiff sample`` drawing 1,000 and 20,000 sequences of
   1 kb (streamed to the file batch by batch: the peak should not grow with the count). A
   small Caduceus with random weights (d_model 16, 1 layer; how much memory the samples take
   does not depend on the weights), the ancestral sampler with 2 steps, batches of 64.
2. ``batch``: bp/s of the cached sampler at batch sizes 1, 4, 16 and 64 (Caduceus d_model 64,
   2 layers, random weights, 16 sequences of 256 bp, T = 256): what larger batches buy on the
   CPU, and where it stops.
3. ``folds``: wall time of the bundled Genomic Benchmarks demo (``configs/
   genomic_benchmarks_demo.yaml``, 4 folds of 2 epochs) in one process and in two CPU
   processes (``trainer.devices=2``: the folds side by side, ``genodiff.parallel``), with the
   check that both give the same fold results.

    python bench/sampling_at_scale.py [--only memory batch folds] [--workdir bench_runs/scale]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from genodiff.model import GenerativeModel  # noqa: E402
from genodiff.tokenizers import CHECKPOINT_KEY, tokenizer_record  # noqa: E402


def write_checkpoint(path: Path, d_model: int, n_layer: int, length: int) -> Path:
    """A checkpoint of a Caduceus MDLM with random weights, as genodiff train writes one."""
    torch.manual_seed(0)
    config = {
        "model": {"name": "caduceus", "d_model": d_model, "n_layer": n_layer},
        "objective": {"name": "mdlm"},
        "data": {"name": "fasta", "max_length": length},
        "ema": {"decay": 0},
    }
    model = GenerativeModel(config)
    content = {"hyper_parameters": {"config": model.config}, "state_dict": model.state_dict()}
    torch.save({**content, CHECKPOINT_KEY: tokenizer_record(model.tokenizer)}, path)
    return path


def timed(command: list[str]) -> tuple[float, int]:
    """(wall seconds, peak resident KiB) of ``command`` run to completion."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed ({status})")
    return time.perf_counter() - start, usage.ru_maxrss


def genodiff(*args: str) -> list[str]:
    return [sys.executable, "-m", "genodiff.cli", *args]


def memory(workdir: Path) -> None:
    checkpoint = write_checkpoint(workdir / "tiny.ckpt", 16, 1, 1024)
    print("| samples of 1 kb | wall (s) | peak RSS (MiB) | file (MB) |")
    print("| ---: | ---: | ---: | ---: |")
    for count in (1_000, 20_000):
        out = workdir / f"memory_{count}.fa"
        out.unlink(missing_ok=True)
        wall, peak = timed(
            genodiff(
                "sample", "--checkpoint", str(checkpoint), "--num-samples", str(count),
                "--length", "1024", "--sampler", "ancestral", "--steps", "2",
                "--batch-size", "64", "--out", str(out), "--no-progress",
            )
        )  # fmt: skip
        size = out.stat().st_size / 1e6
        print(f"| {count:,} | {wall:.1f} | {peak / 1024:.0f} | {size:.1f} |")


def batch(workdir: Path) -> None:
    checkpoint = write_checkpoint(workdir / "small.ckpt", 64, 2, 256)
    print("| batch size | wall (s) | bp/s | vs batch 1 |")
    print("| ---: | ---: | ---: | ---: |")
    first = None
    for size in (1, 4, 16, 64):
        out = workdir / f"batch_{size}.fa"
        out.unlink(missing_ok=True)
        wall, _ = timed(
            genodiff(
                "sample", "--checkpoint", str(checkpoint), "--num-samples", "16",
                "--length", "256", "--sampler", "cached", "--steps", "256",
                "--batch-size", str(size), "--out", str(out), "--no-progress",
            )
        )  # fmt: skip
        rate = 16 * 256 / wall
        first = first or rate
        print(f"| {size} | {wall:.1f} | {rate:.0f} | {rate / first:.2f}x |")
    outputs = {(workdir / f"batch_{size}.fa").read_bytes() for size in (1, 4, 16, 64)}
    print(f"\nthe four files are {'identical' if len(outputs) == 1 else 'DIFFERENT'}")


def folds(workdir: Path) -> None:
    config = ROOT / "configs" / "genomic_benchmarks_demo.yaml"
    rows = {}
    for processes in (1, 2):
        out = workdir / f"folds_{processes}"
        overrides = ["folds=4", "trainer.max_epochs=2", "keep_checkpoints=false"]
        overrides += ["trainer.enable_progress_bar=false", f"trainer.devices={processes}"]
        wall, _ = timed(
            genodiff("finetune", str(config), *overrides, f"output_dir={out}", "--no-progress")
        )
        runs = sorted(out.glob("runs/*/*/fold*/result.json"))
        records = [json.loads(path.read_text()) for path in runs]
        rows[processes] = (wall, [(r["val_acc"], r["test_acc"]) for r in records])
    print("| processes | wall (s) | speed-up |")
    print("| ---: | ---: | ---: |")
    for processes, (wall, _) in rows.items():
        print(f"| {processes} | {wall:.1f} | {rows[1][0] / wall:.2f}x |")
    same = "identical" if rows[1][1] == rows[2][1] else "DIFFERENT"
    print(f"\nfold results (val acc, test acc) {same}: {rows[1][1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=["memory", "batch", "folds"])
    parser.add_argument("--workdir", default="bench_runs/scale")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}\n")  # fmt: skip
    for name in args.only:
        print(f"## {name}\n")
        {"memory": memory, "batch": batch, "folds": folds}[name](workdir)
        print()


if __name__ == "__main__":
    main()
