"""Build the bundled demo task ``human_vs_phage`` in the Genomic Benchmarks layout.

    apt-get download bowtie2-examples && dpkg -x bowtie2-examples_*_all.deb bowtie2
    python bench/make_gb_demo.py \
        --phage bowtie2/usr/share/doc/bowtie2/examples/reference/lambda_virus.fa.gz \
        [--out tests/data/genomic_benchmarks] [--train 250 --test 60]

Class ``human``: 200-bp windows of human chr22:20,000,001-21,000,000 (the bundled demo genome,
``data/chr22_20-21Mb.fa.gz``); class ``phage``: 200-bp windows of phage lambda (NC_001416.1,
48,502 bp: the bowtie2 example reference shipped in Debian's ``bowtie2-examples``). Windows
with an N are skipped. Train windows start in the first 80% of each genome, test windows in the
last 20% (no window is shared between the splits), and each window is reverse-complemented
with probability 1/2 so the strand carries no label information. A fixed seed makes the
output identical on every run: ``<out>/human_vs_phage/{train,test}/{human,phage}/NNNN.txt``.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
from pathlib import Path

import numpy as np

from genodiff.tokenizers import DNATokenizer

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 200
TRAIN_FRACTION = 0.8


def read_fasta_gz(path: Path) -> str:
    """The concatenated sequence lines of a (single-record) gzipped FASTA, upper case."""
    with gzip.open(path, "rt") as f:
        return "".join(line.strip() for line in f if not line.startswith(">")).upper()


def windows(genome: str, count: int, lo: int, hi: int, rng: np.random.Generator) -> list[str]:
    """``count`` distinct N-free windows starting in [lo, hi - WINDOW], random strand."""
    tokenizer = DNATokenizer()
    starts = rng.permutation(np.arange(lo, hi - WINDOW + 1))
    out = []
    for start in starts:
        seq = genome[start : start + WINDOW]
        if "N" in seq:
            continue
        out.append(tokenizer.reverse_complement(seq) if rng.random() < 0.5 else seq)
        if len(out) == count:
            return out
    raise ValueError(f"only {len(out)} N-free windows in [{lo}, {hi}); ask for fewer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--human", default=str(ROOT / "data" / "chr22_20-21Mb.fa.gz"), help="human FASTA (gzip)"
    )
    parser.add_argument("--phage", required=True, help="phage lambda FASTA (gzip), see above")
    parser.add_argument("--out", default="tests/data/genomic_benchmarks")
    parser.add_argument("--train", type=int, default=250, help="train sequences per class")
    parser.add_argument("--test", type=int, default=60, help="test sequences per class")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    task = Path(args.out) / "human_vs_phage"
    shutil.rmtree(task, ignore_errors=True)
    rng = np.random.default_rng(args.seed)
    for label, file in {"human": args.human, "phage": args.phage}.items():
        genome = read_fasta_gz(Path(file))
        cut = int(TRAIN_FRACTION * len(genome))
        split_ranges = {"train": (0, cut, args.train), "test": (cut, len(genome), args.test)}
        for split, (lo, hi, count) in split_ranges.items():
            folder = task / split / label
            folder.mkdir(parents=True)
            for i, seq in enumerate(windows(genome, count, lo, hi, rng)):
                (folder / f"{i:04d}.txt").write_text(seq + "\n")
    print(f"wrote {task}")


if __name__ == "__main__":
    main()
