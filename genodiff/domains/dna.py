"""The DNA domain: FASTA in and out."""

from __future__ import annotations

from pathlib import Path

from genodiff.domains.base import Domain
from genodiff.domains.fasta import FASTA, fasta_template
from genodiff.registry import register_domain
from genodiff.sample_formats import NEUTRAL_FORMATS


@register_domain("dna")
class DNADomain(Domain):
    """Samples as FASTA (``samples.fa``) besides .txt / .jsonl, of the letters A, C, G, T; an
    infilling template is the first record of a FASTA; ``genodiff eval --file`` reads a
    FASTA."""

    name = "dna"
    sample_formats = (FASTA, *NEUTRAL_FORMATS)
    samples_file = "samples.fa"
    # genodiff.data.datamodule.FILE_MAX_N_FRACTION: the windows skipped
    eval_file = (
        "a FASTA (non-overlapping windows tiling every record; a window more than half N "
        "or ambiguity codes is skipped)"
    )
    default_ar_checkpoints = ("outputs/hg38_ar_mamba/checkpoints/last.ckpt",)  # hg38_ar_mamba.yaml
    alphabet = "ACGT"  # N and the IUPAC ambiguity codes are read but never counted

    def read_template(self, path: Path) -> str:
        """The first record's sequence: upper-case A/C/G/T are kept, N and lower case are
        generated (``DNATokenizer.encode_template``)."""
        return fasta_template(path)
