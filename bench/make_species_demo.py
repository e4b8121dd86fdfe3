"""Build the bundled three-species demo of class-conditional training (data/species/).

    apt-get download bowtie2-examples bowtie-examples
    dpkg -x bowtie2-examples_*_all.deb bowtie2 && dpkg -x bowtie-examples_*_all.deb bowtie
    python bench/make_species_demo.py \
        --phage bowtie2/usr/share/doc/bowtie2/examples/reference/lambda_virus.fa.gz \
        --ecoli bowtie/usr/share/doc/bowtie/examples/genomes/NC_008253.fna.gz \
        [--out data/species] [--ecoli-bases 300000]

Writes, as BGZF (random access without decompressing, as the ``fasta`` data module reads):

- ``phage_lambda.fa.gz``: the whole Enterobacteria phage lambda genome (NC_001416.1, 48,502
  bp), the bowtie2 example reference;
- ``e_coli_536.fa.gz``: the first ``--ecoli-bases`` bases of Escherichia coli 536
  (NC_008253.1, 4,938,920 bp), the bowtie example genome.

The third class, human, is the demo genome already bundled (``data/chr22_20-21Mb.fa.gz``).
Provenance (package versions, paths, SHA-256) is in data/README.md. The output is the same
bytes on every run for the same inputs.
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
from pathlib import Path

from genodiff.data.genome import bgzip_fasta

LINE = 60  # bases per FASTA line


def read_single_record(path: Path) -> tuple[str, str]:
    """(header without '>', upper-case sequence) of a one-record gzipped FASTA."""
    with gzip.open(path, "rt") as stream:
        lines = stream.read().split("\n")
    headers = [line for line in lines if line.startswith(">")]
    if len(headers) != 1:
        raise ValueError(f"{path}: expected one FASTA record, found {len(headers)}")
    sequence = "".join(line.strip() for line in lines if not line.startswith(">")).upper()
    return headers[0][1:], sequence


def write_bgzf_fasta(path: Path, header: str, sequence: str) -> None:
    """One record, ``LINE`` bases per line, BGZF-compressed into ``path``."""
    body = "\n".join(sequence[i : i + LINE] for i in range(0, len(sequence), LINE))
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "record.fa"
        plain.write_text(f">{header}\n{body}\n")
        bgzip_fasta(plain, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phage", required=True, help="lambda_virus.fa.gz (bowtie2-examples)")
    parser.add_argument("--ecoli", required=True, help="NC_008253.fna.gz (bowtie-examples)")
    parser.add_argument("--out", default="data/species")
    parser.add_argument("--ecoli-bases", type=int, default=300_000)
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header, phage = read_single_record(Path(args.phage))
    write_bgzf_fasta(out / "phage_lambda.fa.gz", f"phage_lambda {header}", phage)
    header, ecoli = read_single_record(Path(args.ecoli))
    cut = ecoli[: args.ecoli_bases]
    write_bgzf_fasta(out / "e_coli_536.fa.gz", f"e_coli_536 {header} bases 1-{len(cut)}", cut)
    print(f"wrote {out}/phage_lambda.fa.gz ({len(phage):,} bp), e_coli_536.fa.gz ({len(cut):,} bp)")


if __name__ == "__main__":
    main()
