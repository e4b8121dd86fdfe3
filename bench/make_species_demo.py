"""Build the bundled three-species demo of class-conditional training (data/species/).

    apt-get download bowtie-examples ragout-examples
    dpkg -x bowtie-examples_*_all.deb bowtie && dpkg -x ragout-examples_*_all.deb ragout
    python bench/make_species_demo.py \
        --ecoli bowtie/usr/share/doc/bowtie/examples/genomes/NC_008253.fna.gz \
        --saureus ragout/usr/share/doc/ragout/examples/S.Aureus/references/N315.fasta.gz \
        [--out data/species] [--ecoli-bases 300000] [--saureus-bases 120000]

Writes, as BGZF (random access without decompressing, as the ``fasta`` data module reads):

- ``e_coli_536.fa.gz``: the first ``--ecoli-bases`` bases of Escherichia coli 536
  (NC_008253.1, 4,938,920 bp), the bowtie example genome;
- ``s_aureus_n315.fa.gz``: the first ``--saureus-bases`` bases of Staphylococcus aureus N315
  (NC_002745.2, 2,814,816 bp), a ragout example reference. Fewer bases than E. coli on
  purpose: it is the demo's rare class.

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
    parser.add_argument("--ecoli", required=True, help="NC_008253.fna.gz (bowtie-examples)")
    parser.add_argument("--saureus", required=True, help="N315.fasta.gz (ragout-examples)")
    parser.add_argument("--out", default="data/species")
    parser.add_argument("--ecoli-bases", type=int, default=300_000)
    parser.add_argument("--saureus-bases", type=int, default=120_000)
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, source, bases in (
        ("e_coli_536", args.ecoli, args.ecoli_bases),
        ("s_aureus_n315", args.saureus, args.saureus_bases),
    ):
        header, sequence = read_single_record(Path(source))
        cut = sequence[:bases]
        write_bgzf_fasta(out / f"{name}.fa.gz", f"{name} {header} bases 1-{len(cut)}", cut)
        print(f"wrote {out}/{name}.fa.gz ({len(cut):,} bp)")


if __name__ == "__main__":
    main()
