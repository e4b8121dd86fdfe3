"""Genome data: FASTA access, windowed datasets, data modules, the hg38 downloader,
and Genomic Benchmarks task folders (``benchmarks``).

Importing this package registers the data modules ``fasta``, ``hg38`` and ``labelled``.
"""

from genodiff.data.datamodule import DEMO_FASTA, FastaDataModule, Hg38DataModule
from genodiff.data.download import HG38_BED_URL, HG38_FASTA_URL, prepare_hg38
from genodiff.data.genome import Genome, bgzip_fasta
from genodiff.data.hg38 import Hg38Dataset, hg38_windows, read_bed
from genodiff.data.labelled import LabelledDataModule
from genodiff.data.windows import FastaWindowDataset, GenomeWindowDataset, fasta_split_windows

__all__ = [
    "DEMO_FASTA",
    "HG38_BED_URL",
    "HG38_FASTA_URL",
    "FastaDataModule",
    "FastaWindowDataset",
    "Genome",
    "GenomeWindowDataset",
    "Hg38DataModule",
    "Hg38Dataset",
    "LabelledDataModule",
    "bgzip_fasta",
    "fasta_split_windows",
    "hg38_windows",
    "prepare_hg38",
    "read_bed",
]
