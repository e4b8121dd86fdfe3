"""Sample quality of generated DNA (genodiff.metrics) for several sources, side by side.

Every source contributes the same number of sequences of the same length and is compared with
the held-out test windows of a genodiff data config (by default the bundled demo genome, test
split as FastaDataModule cuts it); memorisation is checked against its training split. Rows:

- each ``--samples NAME=FASTA`` (e.g. from ``genodiff sample``);
- ``order-k Markov``: a chain fitted on the training windows (add-one smoothing, as in
  bench/markov_baseline.py) and sampled from a k-mer drawn from the training windows;
- ``shuffled real``: held-out validation windows, each shuffled base by base (same
  composition, no order);
- ``real (validation)``: held-out validation windows themselves: the floor a perfect
  generator of new DNA would reach (a neighbouring region, so not exactly 0 / 0.5);
- ``real (training)``: training windows, a perfect memoriser: low divergences, but flagged.

Usage (see BENCHMARKS.md for the runs behind the table):

    python bench/sample_quality.py --samples MDLM=mdlm.fa AR=ar.fa \
        --ar-checkpoint runs/ar/checkpoints/last.ckpt --out sample_quality_bench
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
from markov_baseline import context_codes, split_sequences

from genodiff.config import load_config
from genodiff.data.build import build_datamodule
from genodiff.domains import DNADomain
from genodiff.metrics import evaluate_samples, read_sequences, write_report
from genodiff.metrics.sequences import evenly_spaced

ROOT = Path(__file__).resolve().parents[1]
DNA = DNADomain.alphabet


def markov_samples(cfg, order: int, n: int, length: int, seed: int) -> list[str]:
    """``n`` sequences from an add-one-smoothed order-``order`` chain (order >= 1) fitted on
    the training windows, each started from an ``order``-mer drawn from those windows."""
    train = split_sequences(cfg, "train", order)
    counts = np.ones((4**order, 4))
    starts = []
    for codes in train:
        context, valid = context_codes(codes, order)
        np.add.at(counts, (context[valid], codes[order:][valid]), 1)
        starts.append(context[valid])
    cumulative = np.cumsum(counts / counts.sum(axis=1, keepdims=True), axis=1)
    rng = np.random.default_rng(seed)
    context = rng.choice(np.concatenate(starts), size=n)
    out = np.empty((n, length), dtype=np.int64)
    for j in range(order):
        out[:, j] = (context // 4 ** (order - 1 - j)) % 4
    for i in range(order, length):
        base = np.minimum((rng.random(n)[:, None] > cumulative[context]).sum(axis=1), 3)
        out[:, i] = base
        context = (context * 4 + base) % 4**order
    return ["".join(DNA[b] for b in row) for row in out]


def shuffled(seqs: list[str], seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.permutation(list(s))) for s in seqs]


def cell(value: float | None, spec: str) -> str:
    """``value`` formatted, or "-" for a statistic undefined on every sequence (CpG o/e of
    sequences without C or G: DistributionComparison)."""
    return "-" if value is None else format(value, spec)


def row(name: str, metrics: dict, seconds: float) -> str:
    js = metrics["kmer_js"]
    mem = metrics["memorisation"]
    d = metrics["discriminator"]
    cells = [
        name,
        *(f"{js[k]:.4f}" for k in ("1", "2", "4", "6")),
        cell(metrics["gc_content"]["samples_sd"], ".3f"),
        cell(metrics["gc_content"]["wasserstein"], ".4f"),
        cell(metrics["cpg_oe"]["samples_mean"], ".3f"),
        f"{metrics['low_complexity_fraction']['samples']:.3f}",
        f"{metrics['pairwise_kmer_distance']['samples']:.3f}",
        "-" if mem["max_identity"] is None else f"{mem['max_identity']:.3f} ({mem['flagged']})",
        "-" if d is None else f"{d['auroc']:.3f} +- {d['auroc_sd']:.3f}",  # None: too few groups
    ]
    if "generative_perplexity" in metrics:
        cells.append(f"{metrics['generative_perplexity']['samples']['gen_ppl']:.4f}")
    return "| " + " | ".join([*cells, f"{seconds:.0f}"]) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", nargs="*", default=[], help="NAME=FASTA rows")
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--ar-checkpoint", default=None, help="AR .ckpt for generative perplexity")
    parser.add_argument("--num", type=int, default=32, help="sequences per row")
    parser.add_argument("--length", type=int, default=1024, help="bp per generated sequence")
    parser.add_argument("--markov-order", type=int, default=4, help="at least 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        default=None,
        help="write every row's report under OUT/NAME, and OUT/reference.fa, OUT/train.fa",
    )
    args = parser.parse_args()

    cfg = load_config(args.config, [f"data.max_length={args.length}"])
    datamodule = build_datamodule(cfg.data)
    reference, valid, train = (datamodule.window_texts(s) for s in ("test", "valid", "train"))
    sources = {}
    for item in args.samples:
        name, _, path = item.partition("=")
        sources[name] = read_sequences(path, DNA)[: args.num]
    order = args.markov_order
    sources[f"order-{order} Markov"] = markov_samples(cfg, order, args.num, args.length, args.seed)
    sources["shuffled real"] = shuffled(evenly_spaced(valid, args.num), args.seed)
    sources["real (validation)"] = evenly_spaced(valid, args.num)
    sources["real (training)"] = evenly_spaced(train, args.num)

    if args.out:  # the same comparison from the command line: genodiff evaluate-samples
        Path(args.out).mkdir(parents=True, exist_ok=True)
        for name, seqs in (("reference", reference), ("train", train)):
            text = "".join(f">{name}_{i}\n{seq}\n" for i, seq in enumerate(seqs))
            (Path(args.out) / f"{name}.fa").write_text(text)
    print(
        f"reference: {len(reference)} test windows of {args.length} bp; training set: "
        f"{len(train)} windows; {args.num} sequences per row"
    )
    header = [
        "source", "JS k=1", "JS k=2", "JS k=4", "JS k=6", "GC sd", "GC W1", "CpG o/e",
        "low-complexity", "6-mer distance", "NN identity max (flagged)", "AUROC",
    ]  # fmt: skip
    if args.ar_checkpoint:
        header.append("Gen PPL (AR)")
    print("| " + " | ".join([*header, "s"]) + " |")
    print("|" + " --- |" * (len(header) + 1))
    for name, samples in sources.items():
        start = time.perf_counter()
        quality = evaluate_samples(
            samples, reference, DNA, train, ar_checkpoint=args.ar_checkpoint, device="cpu"
        )
        seconds = time.perf_counter() - start
        if args.out:
            write_report(quality, Path(args.out) / re.sub(r"[^\w.-]+", "_", name).strip("_"))
        print(row(name, quality.metrics, seconds), flush=True)
    reference_metrics = quality.metrics
    print(
        f"reference windows: GC sd {reference_metrics['gc_content']['reference_sd']:.3f}, "
        f"CpG o/e {cell(reference_metrics['cpg_oe']['reference_mean'], '.3f')}, "
        f"low-complexity {reference_metrics['low_complexity_fraction']['reference']:.3f}, "
        f"6-mer distance {reference_metrics['pairwise_kmer_distance']['reference']:.3f}"
        + (
            f", Gen PPL {reference_metrics['generative_perplexity']['reference']['gen_ppl']:.4f}"
            if args.ar_checkpoint
            else ""
        )
    )


if __name__ == "__main__":
    main()
