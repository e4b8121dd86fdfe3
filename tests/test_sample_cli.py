"""``genodiff sample``: every masked-diffusion sampler, constraints, nucleus, and bad input."""

import re

import pytest
import torch
from Bio import SeqIO

import genodiff
from genodiff import cli
from tests.test_cli import DEMO, TINY


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    overrides = [*TINY, "samples.num_samples=0", "evaluate_test=false", f"output_dir={out}"]
    genodiff.train(DEMO, overrides)
    return str(out / "checkpoints" / "last.ckpt")


def sample(checkpoint, out, *options):
    steps = [] if "first-hitting" in options else ["--steps", "6"]  # it takes none (refused)
    base = ["sample", "--checkpoint", checkpoint, "--num-samples", "2", *steps]
    return cli.main([*base, *options, "--out", str(out)])


def records(path):
    return list(SeqIO.parse(path, "fasta"))


@pytest.mark.parametrize(
    "options",
    [
        ["--sampler", "ancestral"],
        ["--sampler", "cached"],
        ["--sampler", "first-hitting"],
        ["--sampler", "semi-ar", "--block", "12", "--stride", "5"],
    ],
)
def test_each_sampler_writes_traceable_fasta(checkpoint, tmp_path, options):
    assert sample(checkpoint, tmp_path / "s.fa", "--length", "24", *options) == 0
    found = records(tmp_path / "s.fa")
    assert len(found) == 2
    assert all(len(r.seq) == 24 and set(str(r.seq)) <= set("ACGTN") for r in found)
    assert f"sampler={options[1]}" in found[0].description
    # first-hitting jumps from event to event and takes no steps: its header claims none
    assert ("steps=6" in found[0].description) == (options[1] != "first-hitting")
    if options[1] == "semi-ar":
        assert "block=12 stride=5" in found[0].description


def test_dtype_samples_with_the_weights_in_that_type(checkpoint, tmp_path, monkeypatch):
    from genodiff.pipeline import Model

    seen = []
    real = Model.generate_to_file

    def spy(self, *args, **kwargs):
        seen.append({p.dtype for p in self.network.parameters()})
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Model, "generate_to_file", spy)
    assert sample(checkpoint, tmp_path / "h.fa", "--length", "24", "--dtype", "bfloat16") == 0
    assert sample(checkpoint, tmp_path / "f.fa", "--length", "24") == 0
    assert seen == [{torch.bfloat16}, {torch.float32}]  # asked for, and the default
    found = records(tmp_path / "h.fa")
    assert len(found) == 2 and all(
        len(r.seq) == 24 and set(str(r.seq)) <= set("ACGT") for r in found
    )


def test_prefix_is_kept(checkpoint, tmp_path):
    assert sample(checkpoint, tmp_path / "p.fa", "--length", "30", "--prefix", "acgTTGCA") == 0
    found = records(tmp_path / "p.fa")
    assert all(str(r.seq).startswith("ACGTTGCA") and len(r.seq) == 30 for r in found)
    assert "prefix=8bp" in found[0].description


@pytest.mark.parametrize("sampler", ["cached", "first-hitting"])
def test_infill_keeps_upper_case_bases_and_sets_the_length(checkpoint, tmp_path, sampler):
    template = "ACGTACnnnnGGCCNNNNTTaacc"
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">target some description\n{template[:12]}\n{template[12:]}\n")
    assert sample(checkpoint, tmp_path / "i.fa", "--infill", str(fasta), "--sampler", sampler) == 0
    for record in records(tmp_path / "i.fa"):
        assert len(record.seq) == len(template)
        for letter, out in zip(template, str(record.seq), strict=True):
            assert out == letter if letter in "ACGT" else out in "ACGTN"
    assert "infill=in.fa:12bp_generated" in record.description


@pytest.mark.parametrize("option", ["--top-p", "--nucleus"])
def test_top_p_and_temperature_are_recorded(checkpoint, tmp_path, option):
    out = tmp_path / "t.fa"
    assert sample(checkpoint, out, "--length", "20", option, "0.5", "--temperature", "0.7") == 0
    assert "temperature=0.7 top_p=0.5" in records(out)[0].description


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--prefix", "ACGXT"], "'X' at position 4"),
        (["--prefix", "ACG T"], "' ' at position 4"),  # no character is dropped silently
        (["--prefix", "ACGNT"], "'N' at position 4"),
        (["--prefix", "ACGÄT"], "'Ä' at position 4"),
        (["--length", "4", "--prefix", "ACGTA"], "longer than the length 4"),
        (["--sampler", "euler"], "has no sampler 'euler'"),
        (["--block", "16", "--stride", "8"], "apply only to the semi-ar sampler (--block)"),
        (["--sampler", "semi-ar"], "needs a block and a stride (--block, --stride)"),
        (
            ["--sampler", "semi-ar", "--block", "16", "--stride", "16"],
            "share block - stride tokens, got stride 16 (--stride, --block)",
        ),
        (["--top-p", "0"], "top_p must be in (0, 1], got 0.0"),
        (["--temperature", "0"], "temperature must be > 0"),
        (["--prefix", "AC", "--infill", "x.fa"], "exclude each other"),
        (["--cuda-graphs", "--device", "cpu"], "need the model on a CUDA device; it is on cpu"),
    ],
)
def test_bad_options_exit_2_with_one_line(checkpoint, tmp_path, capsys, options, message):
    assert sample(checkpoint, tmp_path / "bad.fa", *options) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("genodiff sample: error:") and "\n" not in err
    assert message in err
    assert not (tmp_path / "bad.fa").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty"),
        ("ACGTNNNN\n", "must start with a '>name' header"),
        (">only_header\n", "has no sequence"),
        (">r\nACGT-NNA\n", "'-' at position 5"),
    ],
)
def test_bad_infill_files_exit_2_with_one_line(checkpoint, tmp_path, capsys, content, message):
    fasta = tmp_path / "in.fa"
    fasta.write_text(content)
    assert sample(checkpoint, tmp_path / "bad.fa", "--infill", str(fasta)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("genodiff sample: error:") and "\n" not in err
    assert message in err


def test_help_gives_every_optional_setting_its_default(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["sample", "--help"])
    assert stop.value.code == 0
    options = capsys.readouterr().out.split("options:")[1]
    entries = [" ".join(e.split()) for e in re.split(r"\n  (?=-)", options) if e.strip()]
    described = {entry.split()[0]: entry for entry in entries}
    assert "--temperature" in described and "--steps" in described  # the split found them
    required = {"-h,", "--checkpoint", "--out"}
    for option, entry in described.items():
        if option not in required:
            assert "(default: " in entry, entry
    assert "(default: the checkpoint's samples.steps, else 1024)" in described["--steps"]
