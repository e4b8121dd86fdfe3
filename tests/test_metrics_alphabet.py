"""The sequence metrics read the letters the samples' domain declares (``Domain.alphabet``), not
letters of their own: DNA's come from its domain, the same samples spelt in another alphabet
score the same, and a sample file's domain gives the alphabet that ``genodiff
evaluate-samples`` uses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genodiff import registry
from genodiff.domains import DNADomain, Domain
from genodiff.errors import InputValueError
from genodiff.metrics import evaluate_sample_files, evaluate_samples, kmer_spectrum
from genodiff.metrics.composition import gc_content
from genodiff.metrics.report import plot_kmer_spectra
from genodiff.metrics.sequences import base_codes, reverse_complement_codes
from genodiff.model import GenerativeModel
from genodiff.sample_files import sample_alphabet
from genodiff.sample_formats import NEUTRAL_FORMATS, TEXT, SampleFormat
from genodiff.tokenizers import DNATokenizer
from tests.test_generative_perplexity import save
from tests.test_metrics import random_dna

DNA = DNADomain.alphabet
RNA = "ACGU"
RNA_LINES = SampleFormat("RNA, one sample per line", (".rna",), TEXT.write, TEXT.read)


class RNADomain(Domain):
    """A domain whose samples are strings of A, C, G, U, in a format of its own."""

    name = "rna"
    sample_formats = (RNA_LINES, *NEUTRAL_FORMATS)
    alphabet = RNA


class ScoresDomain(Domain):
    """A domain whose samples are not strings of a few letters."""

    name = "scores"
    sample_formats = (SampleFormat("scores", (".scores",), TEXT.write, TEXT.read),)


@pytest.fixture
def rna_domain(monkeypatch):
    monkeypatch.setitem(registry._REGISTRIES["domain"], "rna", RNADomain)
    monkeypatch.setitem(registry._REGISTRIES["domain"], "scores", ScoresDomain)


def as_rna(sequences: list[str]) -> list[str]:
    return [s.replace("T", "U") for s in sequences]


def test_the_dna_domain_declares_the_letters_its_tokenizer_samples():
    tokenizer = DNATokenizer()
    assert DNA == "ACGT" == tokenizer.decode(list(tokenizer.sample_ids))


def test_codes_and_kmers_follow_the_alphabet():
    assert base_codes("ACGUTn", RNA).tolist() == [0, 1, 2, 3, -1, -1]  # T is not an RNA letter
    assert base_codes("CAB-b", "ABC").tolist() == [2, 0, 1, -1, 1]
    # 3 letters, 9 dinucleotides: AB = 0 * 3 + 1, BC = 1 * 3 + 2, CA = 2 * 3 + 0
    assert kmer_spectrum(["ABCAB"], 2, "ABC").tolist() == [0, 0.5, 0, 0, 0, 0.25, 0.25, 0, 0]
    with pytest.raises(InputValueError, match="GC content counts C, which the alphabet ABG"):
        gc_content("ABG", "ABG")
    with pytest.raises(InputValueError, match="the alphabet ACGU has none for A, U"):
        reverse_complement_codes(base_codes("ACGU", RNA), RNA)
    for alphabet in ("AA", "A", "AC-", "ACGÜ"):
        with pytest.raises(InputValueError, match="2 or more distinct ASCII letters"):
            base_codes("AC", alphabet)


def test_samples_spelt_in_another_alphabet_score_the_same():
    samples, reference = random_dna(8, 60, seed=1), random_dna(30, 60, seed=2)
    dna = evaluate_samples(samples, reference, DNA)
    rna = evaluate_samples(as_rna(samples), as_rna(reference), RNA)
    assert rna.metrics == dna.metrics and rna.alphabet == RNA
    ticks = [t.get_text() for t in plot_kmer_spectra(rna).axes[0].get_xticklabels()]
    assert ticks == ["AA", "AC", "AG", "AU", "CA", "CC", "CG", "CU",
                     "GA", "GC", "GG", "GU", "UA", "UC", "UG", "UU"]  # fmt: skip
    # read with DNA's letters, every U of the RNA samples is skipped
    skipped = evaluate_samples(as_rna(samples), as_rna(reference), DNA).metrics
    assert skipped["samples"]["bases"] == sum(len(s) - s.count("T") for s in samples)
    assert skipped["kmer_js"] != dna.metrics["kmer_js"]


def test_a_sample_file_gives_the_alphabet_of_its_domain(rna_domain, tmp_path):
    assert sample_alphabet("s.fa") == sample_alphabet("s.txt", None, "r.fasta.gz") == DNA
    assert sample_alphabet("s.rna", "r.fa") == RNA  # the samples' own format comes first
    with pytest.raises(InputValueError, match="domains dna, rna declare an alphabet"):
        sample_alphabet("s.txt", "r.jsonl")  # neutral formats: two domains could own them
    with pytest.raises(InputValueError, match="the scores domain declares no alphabet"):
        sample_alphabet("s.scores")


def test_evaluate_sample_files_reads_the_domains_letters(rna_domain, tmp_path):
    samples, reference = random_dna(6, 50, seed=3), random_dna(20, 50, seed=4)
    files = {}
    for name, suffix, seqs in (("dna", ".txt", samples), ("rna", ".rna", as_rna(samples))):
        files[name] = tmp_path / f"samples{suffix}"
        files[name].write_text("\n".join(seqs) + "\n")
    (tmp_path / "real.fa").write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(reference)))
    (tmp_path / "real.rna").write_text("\n".join(as_rna(reference)) + "\n")
    # .txt with a FASTA reference: DNA's letters; .rna: RNA's, read from both files
    dna = evaluate_sample_files(files["dna"], tmp_path / "real.fa")
    rna = evaluate_sample_files(files["rna"], tmp_path / "real.rna")
    assert (dna.alphabet, rna.alphabet) == (DNA, RNA)
    for quality in (dna, rna):
        for side in ("samples", "reference"):
            del quality.metrics[side]["file"]
    assert rna.metrics == dna.metrics
    np.testing.assert_array_equal(
        kmer_spectrum(rna.samples, 3, RNA), kmer_spectrum(samples, 3, DNA)
    )


def test_the_ar_checkpoint_must_score_the_samples_letters(rna_domain, tmp_path):
    torch.manual_seed(0)
    config = {"model": {"name": "mamba", "d_model": 16, "n_layer": 1}, "objective": {"name": "ar"},
              "data": {"name": "fasta", "max_length": 32}, "ema": {"decay": 0.0}}  # fmt: skip
    checkpoint = save(GenerativeModel(config), tmp_path / "ar.ckpt")
    samples, reference = as_rna(random_dna(4, 40, seed=5)), as_rna(random_dna(10, 40, seed=6))
    (tmp_path / "s.rna").write_text("\n".join(samples) + "\n")
    (tmp_path / "r.rna").write_text("\n".join(reference) + "\n")
    with pytest.raises(InputValueError, match=r"is a dna checkpoint \(alphabet ACGT\); samples of"):
        evaluate_sample_files(tmp_path / "s.rna", tmp_path / "r.rna", ar_checkpoint=checkpoint)


def test_samples_of_a_domain_without_an_alphabet_are_refused(rna_domain, tmp_path):
    from genodiff.pipeline import Samples
    from genodiff.sample_quality import evaluate_samples as evaluate_report

    tokenizer = DNATokenizer()
    tokenizer.domain = "scores"  # its samples decode to letters, but the domain has no alphabet
    samples = Samples(torch.tensor([tokenizer.encode("ACGTACGT")]), run=None, tokenizer=tokenizer)
    with pytest.raises(InputValueError, match="the scores domain declares no alphabet"):
        evaluate_report(samples, ["ACGTACGT"], out=tmp_path / "report")
    assert not (tmp_path / "report" / "metrics.json").exists()
