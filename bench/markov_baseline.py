"""Order-k Markov perplexity on the same train/test windows a genodiff data config uses.

The reference a trained model must beat: an add-one-smoothed order-k Markov chain fitted on
the A/C/G/T bases of the training windows and scored on every A/C/G/T base of the test
windows (context taken from the genome just before the base, so the chain sees at least as
much left context as it wants). ``--score-file FASTA`` scores the windows ``genodiff eval
--file FASTA`` scores instead (non-overlapping ``max_length`` windows tiling every record,
mostly-N windows skipped): a file of another chromosome, say. Usage:

    python bench/markov_baseline.py configs/demo.yaml --orders 0 2 4 6 8
    python bench/markov_baseline.py configs/hg38.yaml data=demo data.fasta=chrX.fa \
        data.split_fractions=[0.78,0.02,0.2] --orders 10 --score-file data/chr22_20-21Mb.fa.gz
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from genodiff.config import load_config
from genodiff.data.genome import Genome
from genodiff.data.windows import fasta_split_windows
from genodiff.tokenizers import DNATokenizer

TOK = DNATokenizer()


def base_codes(seq: str) -> np.ndarray:
    """0..3 for A/C/G/T, -1 for anything else."""
    ids = TOK.encode_array(seq)
    codes = ids - TOK.base_ids[0]
    codes[(ids < TOK.base_ids[0]) | (ids > TOK.base_ids[-1])] = -1
    return codes


def context_codes(codes: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """(context index in 0..4^order-1, valid) for every position >= order."""
    n = len(codes) - order
    context = np.zeros(n, dtype=np.int64)
    valid = codes[order:] >= 0
    for j in range(order):
        c = codes[j : j + n]
        valid &= c >= 0
        context = context * 4 + np.maximum(c, 0)
    return context, valid


def markov_perplexity(train: list[np.ndarray], test: list[np.ndarray], order: int) -> float:
    counts = np.ones((4**order, 4))  # add-one smoothing
    for codes in train:
        context, valid = context_codes(codes, order)
        cells = context[valid] * 4 + codes[order:][valid]  # (context, next base) as one index
        counts += np.bincount(cells, minlength=counts.size).reshape(counts.shape)
    log_probs = np.log(counts / counts.sum(axis=1, keepdims=True))
    total, n = 0.0, 0
    for codes in test:
        context, valid = context_codes(codes, order)
        total -= log_probs[context[valid], codes[order:][valid]].sum()
        n += int(valid.sum())
    return math.exp(total / n)


def split_sequences(cfg, split: str, order: int, fasta: str | None = None) -> list[np.ndarray]:
    """Base codes of each ``split`` window (``fasta``: every window of that file instead),
    preceded by up to ``order`` bases of context (the first ``order`` positions of every
    array are context only, never targets)."""
    data = cfg.data
    genome = Genome(fasta or data.fasta, cache_dir=data.get("cache_dir"))
    fractions = (1.0, 0.0, 0.0) if fasta else data.split_fractions  # a file: all of it
    windows = fasta_split_windows(
        genome, "train" if fasta else split, data.max_length, fractions, data.max_n_fraction
    )
    return [
        base_codes(genome.fetch(chrom, max(0, start - order), end)) for chrom, start, end in windows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="a genodiff config with a 'fasta' data section")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--orders", type=int, nargs="+", default=[0, 2, 4, 6, 8])
    parser.add_argument("--score-file", help="score this FASTA's windows, not the test split")
    args = parser.parse_args()
    cfg = load_config(args.config, args.overrides)
    scored = args.score_file or "test"
    for order in args.orders:
        train = split_sequences(cfg, "train", order)
        test = split_sequences(cfg, "test", order, args.score_file)
        perplexity = markov_perplexity(train, test, order)
        print(f"order-{order} Markov perplexity on {scored}: {perplexity:.4f}")


if __name__ == "__main__":
    main()
