"""`genodiff evaluate-samples` end to end: report files, copies flagged, generative perplexity
of samples and reference side by side, errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from genodiff import cli
from genodiff.checkpoints import load_model
from genodiff.generative_perplexity import generative_perplexity
from genodiff.metrics import REPORT_FILES
from genodiff.model import GenerativeModel
from genodiff.sample_quality import report_folder
from tests.test_generative_perplexity import save
from tests.test_metrics import COMPLEMENT, random_dna

LENGTH = 40


def write_fasta(path, seqs):
    path.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(seqs)))
    return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quality")
    torch.manual_seed(0)
    ar = GenerativeModel(
        {
            "model": {"name": "mamba", "d_model": 16, "n_layer": 1},
            "objective": {"name": "ar"},
            "data": {"name": "fasta", "max_length": 32},
            "ema": {"decay": 0.0},
        }
    )
    train = random_dna(2, 2000, seed=11)
    samples = [
        train[0][300 : 300 + LENGTH],  # a copy
        train[1][900 : 900 + LENGTH].translate(COMPLEMENT)[::-1],  # a reverse-complement copy
        *random_dna(4, LENGTH, seed=12),
    ]
    reference = random_dna(12, LENGTH, seed=13)  # 2 windows per sample: no warning
    return {
        "samples": samples,
        "reference": reference,
        "samples_fa": write_fasta(folder / "gen.fa", samples),
        "reference_fa": write_fasta(folder / "real.fa", reference),
        "train_fa": write_fasta(folder / "train.fa", train),
        "ar": save(ar, folder / "ar.ckpt"),
    }


def test_evaluate_samples_writes_the_report(inputs, tmp_path, capsys):
    out = tmp_path / "report"
    (out / "keep.txt").parent.mkdir()
    (out / "keep.txt").write_text("not ours")
    args = [
        "evaluate-samples",
        inputs["samples_fa"],
        "--reference",
        inputs["reference_fa"],
        "--train",
        inputs["train_fa"],
        "--ar-checkpoint",
        inputs["ar"],
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "| metric | samples | reference | note |" in printed and "discriminator AUROC" in printed
    assert sorted(p.name for p in out.iterdir()) == sorted([*REPORT_FILES, "keep.txt"])
    for png in ("kmer_spectra.png", "gc_histogram.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["kmer_js"]) == ["1", "2", "3", "4", "5", "6"]
    assert all(0.0 <= v <= 1.0 for v in metrics["kmer_js"].values())
    assert 0.0 <= metrics["discriminator_auroc"] <= 1.0
    assert metrics["discriminator"]["folds"] == 5
    assert metrics["samples"]["file"] == inputs["samples_fa"]
    assert metrics["reference"]["sequences"] == 12
    assert not [w for w in metrics["warnings"] if "reference windows" in w]

    memorisation = metrics["memorisation"]
    assert memorisation["flagged"] == 2
    first, second = memorisation["neighbours"][:2]
    assert (first["identity"], first["record"], first["start"], first["strand"]) == (1, 0, 300, "+")
    assert (second["identity"], second["record"], second["start"]) == (1, 1, 900)
    assert second["strand"] == "-"

    # each side scored as `genodiff gen-ppl` scores it (tested there against an explicit loop)
    model = load_model(inputs["ar"])
    gen_ppl = metrics["generative_perplexity"]
    for side in ("samples", "reference"):
        expected = generative_perplexity(inputs[side], model)
        assert gen_ppl[side]["gen_ppl"] == pytest.approx(expected.gen_ppl, rel=1e-6)
        assert gen_ppl[side]["tokens"] == LENGTH * len(inputs[side]) == expected.tokens
    assert gen_ppl["samples"]["gen_ppl"] != pytest.approx(gen_ppl["reference"]["gen_ppl"])


def test_default_folder_and_optional_parts(inputs, tmp_path):
    samples = tmp_path / "mdlm_samples.fa"
    samples.write_text(Path(inputs["samples_fa"]).read_text())
    assert cli.main(["evaluate-samples", str(samples), "--reference", inputs["reference_fa"]]) == 0
    metrics = json.loads((tmp_path / "mdlm_samples_quality" / "metrics.json").read_text())
    assert "memorisation" not in metrics and "generative_perplexity" not in metrics
    assert np.isfinite(metrics["gc_content"]["wasserstein"])


def test_a_second_report_into_the_same_folder_needs_overwrite(inputs, tmp_path, capsys):
    argv = ["evaluate-samples", inputs["samples_fa"], "--reference", inputs["reference_fa"]]
    argv += ["--out", str(tmp_path / "report")]
    assert cli.main(argv) == 0
    first = (tmp_path / "report" / "metrics.json").read_text()
    (tmp_path / "report" / "metrics.md").write_text("edited by the user")
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a report already (metrics.json, metrics.md)" in err and "\n" not in err
    assert "--overwrite" in err
    assert (tmp_path / "report" / "metrics.md").read_text() == "edited by the user"
    assert cli.main([*argv, "--overwrite"]) == 0
    assert (tmp_path / "report" / "metrics.json").read_text() == first  # same inputs, same seed
    assert (tmp_path / "report" / "metrics.md").read_text() != "edited by the user"


def test_errors_are_one_line(inputs, tmp_path, capsys):
    missing = ["evaluate-samples", str(tmp_path / "none.fa"), "--reference", inputs["reference_fa"]]
    assert cli.main(missing) == 2
    assert "none.fa" in capsys.readouterr().err
    protein = write_fasta(tmp_path / "protein.fa", ["MKVLLQQ", "MKKLLEE"])
    assert cli.main(["evaluate-samples", protein, "--reference", inputs["reference_fa"]]) == 2
    assert "no A/C/G/T" in capsys.readouterr().err
    base = ["evaluate-samples", inputs["samples_fa"], "--reference", inputs["reference_fa"]]
    sentence = "The cat sat on the mat and ate a great green grape today."
    english = tmp_path / "english.txt"  # one sentence a line, each with some A/C/G/T
    english.write_text(f"{sentence}\n" * 200)
    share = sum(c in "ACGTacgt" for c in sentence) / len(sentence)
    assert cli.main([*base, "--train", str(english)]) == 2
    err = capsys.readouterr().err
    assert f"english.txt: only {share:.0%} of its characters are A/C/G/T letters" in err
    assert cli.main([*base, "--ar-checkpoint", str(tmp_path / "no.ckpt")]) == 2
    assert "no.ckpt" in capsys.readouterr().err


def test_the_default_folder_drops_only_the_format_suffix(tmp_path):
    # A temperature sweep's files, whose names hold dots: each its own report folder (both
    # used to be "samples_t0_quality", and the second run was refused or replaced the first's).
    sweep = [tmp_path / "samples_t0.9.fa", tmp_path / "samples_t1.1.fa"]
    assert [report_folder(path) for path in sweep] == [
        tmp_path / "samples_t0.9_quality",
        tmp_path / "samples_t1.1_quality",
    ]
    assert report_folder(tmp_path / "mdlm.fa.gz") == tmp_path / "mdlm_quality"
    assert report_folder(tmp_path / "mdlm.jsonl") == tmp_path / "mdlm_quality"


@pytest.mark.parametrize("parameter", ["samples", "reference", "train"])
def test_a_sequence_given_as_a_str_is_refused_saying_to_give_a_list(inputs, tmp_path, parameter):
    """A str is read as a file name; one sequence passed as a str named no file, and the error
    said so in a file's words alone (``samples file ACGTTGCAACGG... not found``)."""
    import genodiff
    from genodiff.errors import InputFileNotFoundError

    given = {"samples": inputs["samples"], "reference": inputs["reference"], "train": None}
    given[parameter] = "ACGTTGCAACGGTACCAGTAGGCATT"
    samples = given.pop("samples")
    with pytest.raises(InputFileNotFoundError) as refused:
        genodiff.evaluate_samples(samples, **given, out=tmp_path / "report")
    assert str(refused.value) == (
        f"{parameter} is a str, which is read as a file name, and there is no file "
        "ACGTTGCAACGGTACCA...; to pass sequences, give a list of them (e.g. [sequence])"
    )
    assert refused.value.parameter == parameter
    assert not (tmp_path / "report").exists()


def test_a_command_names_a_missing_file_as_a_file_whatever_its_letters(inputs, capsys):
    """The command's arguments are file names: no list to suggest there."""
    for argv in (
        ["evaluate-samples", "ACGTACGT", "--reference", inputs["reference_fa"]],
        ["evaluate-samples", inputs["samples_fa"], "--reference", "ACGTACGT"],
        ["evaluate-samples", inputs["samples_fa"], "--reference", inputs["reference_fa"]]
        + ["--train", "ACGTACGT"],
    ):
        assert cli.main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert " ACGTACGT not found" in line and "list" not in line, line
