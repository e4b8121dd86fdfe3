"""`genodiff sample --label/--guidance/--classifier` on a tiny class-conditional run: what the
files record, and bad input refused in one line with nothing written."""

import json
import re
from pathlib import Path

import pytest
import torch
from Bio import SeqIO

import genodiff
import genodiff.pipeline
from genodiff import cli
from genodiff.classifiers.guide import ClassifierGuide
from genodiff.errors import InputValueError
from tests import test_sample_cli
from tests.test_bad_input_cli import one_line_error
from tests.test_classifiers import TOK, classifier
from tests.test_conditioning import ROOT, TINY_RUN

unconditional = test_sample_cli.checkpoint  # the tiny unconditional run of the sample tests


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("conditional")
    config = str(ROOT / "configs" / "conditional_demo.yaml")
    genodiff.train(config, [*TINY_RUN, "evaluate_test=false"], output_dir=out)
    return out


@pytest.fixture(scope="module")
def conditional(run):
    return str(run / "checkpoints" / "last.ckpt")


def sample(checkpoint, out, *options):
    base = ["sample", "--checkpoint", checkpoint, "--num-samples", "2", "--length", "12"]
    steps = [] if "first-hitting" in options else ["--steps", "4"]  # it takes none (refused)
    return cli.main([*base, *steps, *options, "--out", str(out)])


def test_a_conditional_run_ends_with_samples_of_each_class(run):
    assert not (run / "samples.fa").exists()
    for name in ("human", "phage"):
        (record,) = SeqIO.parse(run / f"samples_{name}.fa", "fasta")
        description = record.description
        assert f"label={name} guidance=1 guidance_schedule=constant guidance_form=x0" in description


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting", "semi-ar"])
def test_guided_samples_record_label_gamma_and_schedule(conditional, tmp_path, sampler):
    options = ["--label", "phage", "--guidance", "2.5", "--guidance-schedule", "ramp"]
    options += ["--sampler", sampler] + (["--block", "6", "--stride", "3"] * (sampler == "semi-ar"))
    assert sample(conditional, tmp_path / "g.fa", *options) == 0
    records = list(SeqIO.parse(tmp_path / "g.fa", "fasta"))
    assert len(records) == 2 and all(set(str(r.seq)) <= set("ACGT") for r in records)
    header = "label=phage guidance=2.5 guidance_schedule=ramp guidance_form=x0"
    assert header in records[0].description
    assert sample(conditional, tmp_path / "g.jsonl", *options) == 0
    row = json.loads((tmp_path / "g.jsonl").read_text().splitlines()[0])
    recorded = (row["label"], row["guidance"], row["guidance_schedule"], row["guidance_form"])
    assert recorded == ("phage", 2.5, "ramp", "x0")


def test_the_transition_form_is_recorded(conditional, tmp_path):
    options = ["--label", "phage", "--guidance", "2", "--guidance-form", "transition"]
    assert sample(conditional, tmp_path / "t.jsonl", *options) == 0
    row = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert (row["guidance"], row["guidance_form"]) == (2.0, "transition")


def test_unguided_samples_record_no_guidance(conditional, tmp_path):
    assert sample(conditional, tmp_path / "u.fa") == 0
    assert "label=" not in next(SeqIO.parse(tmp_path / "u.fa", "fasta")).description
    assert sample(conditional, tmp_path / "u.jsonl") == 0
    row = json.loads((tmp_path / "u.jsonl").read_text().splitlines()[0])
    assert not {"label", "guidance", "guidance_schedule", "guidance_form", "classifier"} & set(row)


class FakeClassifier:
    """A test double of a noisy classifier checkpoint: no tilt at all."""

    def __init__(self, class_names, tokenizer_name="dna"):
        self.class_names = class_names
        self.tokenizer_name = tokenizer_name
        self.tilts = 0

    def tilt(self, x, label, where, exact, t=None):
        self.tilts += 1
        assert exact and not where[~(x == 3)].any()  # only masked positions are tilted
        return torch.zeros(*x.shape, 12)

    def next_token_scores(self, prefix, candidates, label):
        return torch.zeros(len(prefix), len(candidates))


@pytest.fixture
def classifier_loader(monkeypatch):
    """Installs a stand-in for the classifier loader that ``genodiff sample --classifier``
    (``genodiff.pipeline``) calls: it returns the given double, as loaded from the path."""

    def install(double):
        def load(path, device):
            double.source = str(path)
            return double

        monkeypatch.setattr(genodiff.pipeline, "load_classifier", load)
        return double

    return install


def test_classifier_guidance_is_recorded(conditional, tmp_path, classifier_loader):
    double = classifier_loader(FakeClassifier(["human", "phage"]))
    options = ["--classifier", "noisy.ckpt", "--classifier-form", "exact", "--label", "human"]
    assert sample(conditional, tmp_path / "c.fa", *options) == 0
    assert double.tilts > 0
    description = next(SeqIO.parse(tmp_path / "c.fa", "fasta")).description
    assert (
        "label=human guidance=1 guidance_schedule=constant guidance_form=transition" in description
    )
    assert "classifier=noisy.ckpt classifier_form=exact" in description


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--label", "mouse"], "is not a class of [^(]*; its classes are: human, phage"),
        (["--label", "Human"], r"is not a class of .* \(did you mean 'human'\?\); its classes"),
        (["--label", "phag"], r"is not a class of .* \(did you mean 'phage'\?\); its classes"),
        (["--label", "human", "--guidance", "nan"], "--guidance"),
        (["--label", "human", "--guidance", "-1"], "--guidance"),
        (
            ["--label", "human", "--guidance", "1e9"],
            r"got 1000000000.0: .*above 100 the guided law",
        ),
        (["--guidance", "2"], "--label"),
        (["--label", "human", "--guidance-schedule", "cosine"], "--guidance-schedule"),
        (["--label", "human", "--classifier-form", "second"], "--classifier-form"),
        (["--label", "human", "--guidance-form", "logit"], "--guidance-form"),
        (["--guidance-form", "x0"], "--label"),
        (
            ["--label", "human", "--sampler", "first-hitting", "--guidance", "2"]
            + ["--guidance-schedule", "ramp", "--guidance-form", "transition"],
            "samplers that do: ancestral, cached, semi-ar.*--guidance-form",
        ),
    ],
)
def test_bad_guidance_is_one_line_and_writes_nothing(
    conditional, tmp_path, capsys, options, message
):
    capsys.readouterr()
    assert sample(conditional, tmp_path / "s.fa", *options) == 2
    assert re.search(message, one_line_error(capsys, "sample"))
    assert not any(tmp_path.iterdir())


def test_a_label_on_an_unconditional_checkpoint(unconditional, tmp_path, capsys):
    capsys.readouterr()
    assert sample(unconditional, tmp_path / "s.fa", "--label", "human") == 2
    assert "unconditional model" in one_line_error(capsys, "sample")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("double", "message"),
    [
        (FakeClassifier(["phage", "human"]), "trained for the classes phage, human"),
        (FakeClassifier(["human", "phage"], "bpe"), "reads the tokenizer 'bpe'"),
    ],
)
def test_a_classifier_for_other_classes_or_tokens_is_refused(
    conditional, tmp_path, capsys, classifier_loader, double, message
):
    classifier_loader(double)
    capsys.readouterr()
    options = ["--classifier", "other.ckpt", "--label", "human"]
    assert sample(conditional, tmp_path / "s.fa", *options) == 2
    assert message in one_line_error(capsys, "sample")
    assert not any(Path(tmp_path).iterdir())


def test_a_classifier_of_the_other_kind_is_refused_naming_the_option(
    conditional, tmp_path, capsys, classifier_loader
):
    causal = ClassifierGuide(classifier("causal", "mamba", classes=2), TOK, ["human", "phage"])
    classifier_loader(causal)
    capsys.readouterr()
    options = ["--classifier", "causal.ckpt", "--label", "human", "--sampler", "cached"]
    assert sample(conditional, tmp_path / "s.fa", *options) == 2
    error = one_line_error(capsys, "sample")
    assert "causal classifier, and diffusion sampling (D-CBG) needs a noisy one" in error
    assert error.endswith("(--classifier)")
    assert not any(Path(tmp_path).iterdir())
    model = genodiff.load(conditional)
    with pytest.raises(InputValueError, match="needs a noisy one") as refused:
        model.generate(1, 12, label="human", classifier=causal, steps=4)
    assert refused.value.parameter == "classifier"


def test_class_names_that_would_share_a_samples_file_get_one_each():
    # the training run's per-class files: "a b" and "a_b" were both samples_a_b.fa (the second
    # class's samples overwrote the first's), as Human / human on a case-blind file system
    from genodiff.training.fit_run import class_sample_files

    file = Path("run/samples.fa")
    assert class_sample_files(file, ["human", "phage"]) == [
        Path("run/samples_human.fa"),
        Path("run/samples_phage.fa"),
    ]
    assert class_sample_files(file, ["a b", "a_b", "c"]) == [
        Path("run/samples_0_a_b.fa"),
        Path("run/samples_1_a_b.fa"),
        Path("run/samples_2_c.fa"),
    ]
    named = class_sample_files(file, ["Human", "human"])
    assert len({str(path).lower() for path in named}) == 2


@pytest.mark.parametrize("label", [3, True, b"human"])
def test_a_label_that_is_no_class_name_lists_the_class_names(label):
    # Was: "label must be a string, got 3", naming no class (the CLI's "3" listed them)
    model = genodiff.load("species-conditional", device="cpu")
    with pytest.raises(InputValueError) as refused:
        model.generate(1, length=8, steps=2, label=label)
    message = str(refused.value)
    assert message.startswith(f"label must be a class name (a string), got {label!r}")
    assert message.endswith("the classes of species-conditional are: human, e_coli, s_aureus")
    assert refused.value.parameter == "label"


def test_a_class_id_on_the_command_line_lists_the_class_names(tmp_path, capsys):
    capsys.readouterr()
    assert sample("species-conditional", tmp_path / "s.fa", "--label", "3") == 2
    assert "its classes are: human, e_coli, s_aureus" in one_line_error(capsys, "sample")
    assert not any(tmp_path.iterdir())
