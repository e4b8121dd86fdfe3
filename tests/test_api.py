"""The Python front door (``genodiff.load``, ``Model.generate / score / save_pretrained``,
``genodiff.train``): it gives what the commands give, and needs nothing of the internals.

The sequences ``generate`` returns are compared with the FASTA ``genodiff sample`` writes for
the same options and seed; ``score`` with ``genodiff eval --file --per-window`` on a file of
the same sequences, and on an autoregressive model with the exact NLL computed here by a loop
over the network's next-token log-probabilities.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import pytest
import torch
from Bio import SeqIO
from safetensors.torch import load_file

import genodiff
import genodiff.training.run as training_run
from genodiff import checkpoints, cli
from genodiff.config import ConfigError, load_config
from genodiff.errors import InputValueError, UserInputError
from genodiff.evaluate import evaluate_checkpoint
from genodiff.model import GenerativeModel
from genodiff.pipeline import Model
from genodiff.tokenizers import DNATokenizer
from tests.test_cli import DEMO, ROOT, TINY
from tests.test_conditioning import TINY_RUN
from tests.test_generation_config import network_calls, tiny

CONDITIONAL = str(ROOT / "configs" / "conditional_demo.yaml")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny MDLM run trained through the API into a folder named relative to the working
    directory: the API returns it as an absolute path (usable after a change of directory)."""
    parent = tmp_path_factory.mktemp("api")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(parent)
        folder = genodiff.train(DEMO, TINY, output_dir="run")
    assert folder.is_absolute() and folder.resolve() == (parent / "run").resolve()
    return folder


@pytest.fixture(scope="module")
def conditional_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api_conditional") / "run"
    genodiff.train(CONDITIONAL, TINY_RUN, output_dir=folder, progress=False)
    return folder


def sample_cli(checkpoint, out, *options) -> list[str]:
    argv = ["sample", "--checkpoint", str(checkpoint), "--out", str(out), "--no-progress"]
    assert cli.main([*argv, *options]) == 0
    return [str(record.seq) for record in SeqIO.parse(out, "fasta")]


def test_import_genodiff_and_version_load_no_torch():
    """``import genodiff`` and ``genodiff --version`` stay light: the API is imported lazily."""
    code = (
        "import sys, contextlib, io\n"
        "import genodiff\n"
        "from genodiff import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--version'])\n"
        "print(sorted(m for m in ('torch', 'lightning', 'genodiff.pipeline') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert set(genodiff.__all__) >= {"load", "train", "finetune", "train_classifier"}
    assert callable(genodiff.finetune) and callable(genodiff.evaluate_samples)


def test_generate_is_what_genodiff_sample_writes(run, tmp_path):
    model = genodiff.load(run, device="cpu")
    options = {"length": 40, "steps": 6, "seed": 3, "batch_size": 2}
    samples = model.generate(3, **options)
    assert isinstance(samples, Sequence) and all(isinstance(s, str) for s in samples)
    assert [len(s) for s in samples] == [40, 40, 40]
    flags = ["--num-samples", "3", "--length", "40", "--steps", "6", "--seed", "3"]
    written = sample_cli(run, tmp_path / "cli.fa", *flags, "--batch-size", "2")
    assert samples == written
    # and saved, the file is the command's, byte for byte
    assert samples.save(tmp_path / "api.fa").read_bytes() == (tmp_path / "cli.fa").read_bytes()
    # another seed draws other sequences; the same seed the same ones
    assert model.generate(3, **{**options, "seed": 4}) != samples
    assert model.generate(3, **options) == samples


def test_generate_with_a_prefix_keeps_it(run):
    model = genodiff.load(run / "checkpoints" / "last.ckpt")
    for sequence in model.generate(2, length=24, steps=4, prefix="ACGTTG"):
        assert sequence.startswith("ACGTTG") and len(sequence) == 24


def write_fasta(path, sequences):
    path.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(sequences)))
    return path


def test_score_is_eval_per_window_of_the_same_sequences(run, tmp_path, capsys):
    model = genodiff.load(run, device="cpu")
    sequences = model.generate(5, length=32, steps=4, seed=1)
    scores = model.score(sequences, seed=2, batch_size=2)
    assert len(scores) == 5 and all(s > 0 for s in scores)
    fasta = write_fasta(tmp_path / "s.fa", sequences)
    argv = ["eval", "--checkpoint", str(run), "--file", str(fasta), "--length", "32"]
    argv += ["--seed", "2", "--batch-size", "2", "--json", "--per-window", "--no-progress"]
    assert cli.main(argv) == 0
    windows = json.loads(capsys.readouterr().out)["per_window"]
    expected = [w["nelbo"] / w["tokens"] for w in windows]
    assert scores == pytest.approx(expected, rel=1e-12, abs=0)


def test_score_groups_lengths_and_refuses_a_sequence_without_bases(run):
    model = genodiff.load(run, device="cpu")
    mixed = ["ACGT" * 8, "ACGTACGTAC", "TTGCA" * 8]
    scores = model.score(mixed, seed=5)
    alone = [model.score([s], seed=5)[0] for s in mixed]  # each its own batch from seed 5
    assert scores[0] == pytest.approx(alone[0]) and scores[1] == pytest.approx(alone[1])
    assert scores[2] == pytest.approx(alone[2])
    with pytest.raises(InputValueError, match="sequence 1 has no token to score"):
        model.score(["ACGT", "NNNN"])


def test_score_of_an_ar_model_is_its_exact_nll():
    """An AR model's score is -1/L sum_i log p(x_i | [BOS] x_<i): computed here token by
    token from the network's logits."""
    tokenizer = DNATokenizer()
    config = {
        "model": {"name": "mamba", "d_model": 16, "n_layer": 2},
        "objective": {"name": "ar"},
        "data": {"name": "fasta", "max_length": 16},
        "ema": {"decay": 0},
    }
    torch.manual_seed(0)
    model = Model(GenerativeModel(config, tokenizer), "in memory")
    sequences = ["ACGTTGCAAGT", "GGGCCCATATC"]
    got = model.score(sequences)
    network = model.network.eval_backbone.eval()
    for sequence, score in zip(sequences, got, strict=True):
        ids = [tokenizer.bos_id, *tokenizer.encode(sequence)]
        total = 0.0
        for i in range(1, len(ids)):
            with torch.no_grad():
                logits = network(torch.tensor([ids[:i]]))[0, -1].double()
            total -= float(logits.log_softmax(-1)[ids[i]])
        assert score == pytest.approx(total / len(sequence), rel=1e-5)
    # noise draws mean nothing to an exact likelihood: said, and the score is the same
    with pytest.warns(UserWarning, match=r"t_samples=4 is ignored: this model.s likelihood"):
        assert model.score(sequences, t_samples=4) == got


def test_save_pretrained_then_load_draws_the_same_sequences(run, tmp_path):
    model = genodiff.load(run, device="cpu")
    folder = model.save_pretrained(tmp_path / "exported")
    assert {p.name for p in folder.iterdir()} >= {"config.json", "model.safetensors"}
    again = genodiff.load(folder, device="cpu")
    assert again.config["model"] == model.config["model"]
    options = {"length": 32, "steps": 4, "seed": 9}
    assert again.generate(2, **options) == model.generate(2, **options)
    assert again.score(["ACGT" * 8], seed=1) == pytest.approx(model.score(["ACGT" * 8], seed=1))
    # the folder is what `genodiff export` writes from the checkpoint
    ckpt = run / "checkpoints" / "last.ckpt"
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "cli")]) == 0
    for name in ("config.json", "tokenizer.json"):
        assert (tmp_path / "cli" / name).read_bytes() == (folder / name).read_bytes()
    assert json.loads((tmp_path / "cli" / "genodiff.json").read_text()) == json.loads(
        (folder / "genodiff.json").read_text()
    )
    exported, written = (
        load_file(str(f / "model.safetensors")) for f in (tmp_path / "cli", folder)
    )
    assert exported.keys() == written.keys()
    assert all(torch.equal(exported[k], written[k]) for k in exported)


def test_load_leaves_the_callers_seeded_generator_as_it_was():
    """docs/python_api.md: a session seeded with ``torch.manual_seed`` draws the same numbers
    after ``genodiff.load`` (here of a shipped model: an export folder) as without it."""
    torch.manual_seed(5)
    without_a_load = torch.rand(4)
    torch.manual_seed(5)
    genodiff.load("mdlm-chrx")
    assert torch.equal(torch.rand(4), without_a_load)


def test_a_run_draws_with_the_steps_of_its_samples_section(run, tmp_path):
    """TINY trains with samples.steps=8: its checkpoint and its export draw with 8 steps (the
    ancestral sampler calls the network once per step) unless the call says otherwise."""
    assert "samples.steps=8" in TINY
    exported = genodiff.load(run).save_pretrained(tmp_path / "exported")
    for source in (run / "checkpoints" / "last.ckpt", exported):
        model = genodiff.load(source)
        assert network_calls(model, 1, length=16, sampler="ancestral") == 8
        assert network_calls(model, 1, length=16, sampler="ancestral", steps=3) == 3


def test_a_conditional_run_generates_each_class_with_guidance(conditional_run, tmp_path):
    model = genodiff.load(conditional_run, device="cpu")
    assert model.classes and len(model.classes) >= 2
    label = model.classes[1]
    samples = model.generate(2, length=24, steps=4, label=label, guidance=2.0, seed=0)
    assert samples.run.guidance.name == label and samples.run.guidance.gamma == 2.0
    written = sample_cli(
        conditional_run, tmp_path / "g.fa", "--num-samples", "2", "--length", "24",
        "--steps", "4", "--label", label, "--guidance", "2", "--seed", "0",
    )  # fmt: skip
    assert samples == written
    header = (tmp_path / "g.fa").read_text().splitlines()[0]
    assert f"label={label} guidance=2 guidance_schedule=constant guidance_form=x0" in header
    paper = model.generate(2, length=24, steps=4, label=label, guidance=2.0,
                           guidance_form="transition", seed=0)  # fmt: skip
    assert paper.run.guidance.form == "transition" and samples.run.guidance.form == "x0"
    with pytest.raises(InputValueError, match="not a class") as caught:
        model.generate(1, label="no_such_class")
    assert caught.value.parameter == "label"


def test_guidance_without_a_label_is_refused_and_the_cli_names_the_option(run, tmp_path, capsys):
    model = genodiff.load(run, device="cpu")
    with pytest.raises(InputValueError, match="needs a class") as caught:
        model.generate(1, guidance=2.0)
    assert caught.value.parameter == "label"
    out = tmp_path / "x.fa"
    argv = ["sample", "--checkpoint", str(run), "--out", str(out), "--guidance", "2"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("(--label)") and "\n" not in err
    assert not out.exists()


def test_a_prefix_or_template_letter_that_is_no_base_names_its_option(tmp_path, capsys):
    """A prefix holding N (or any letter not a base) and a template holding a letter that is
    not A/C/G/T/N were refused with no parameter: the command line named no option, and the
    prefix's refusal did not say where a position to generate goes (an infill template)."""
    model = tiny()
    with pytest.raises(InputValueError) as refused:
        model.generate(1, length=8, steps=2, prefix="acNN")
    assert str(refused.value) == (
        "the prefix: 'N' at position 3 is not A, C, G or T (either case); a prefix is fixed "
        "bases: to generate positions inside a sequence, give an infill template (N where it "
        "generates)"
    )
    assert refused.value.parameter == "prefix"
    assert model.generate(1, length=8, steps=2, prefix="acgt")[0].startswith("ACGT")
    template = tmp_path / "template.fa"
    template.write_text(">t\nACGTXNNN\n")
    with pytest.raises(InputValueError) as refused:
        model.generate(1, steps=2, infill=template)
    assert str(refused.value) == "the infill template: 'X' at position 5 is not A/C/G/T/N"
    assert refused.value.parameter == "infill"
    out = tmp_path / "x.fa"
    for option, value in (("--prefix", "ACGU"), ("--infill", str(template))):
        argv = ["sample", "--checkpoint", "mdlm-chrx", "--out", str(out), option, value]
        assert cli.main([*argv, "--steps", "2", "--num-samples", "1", "--no-progress"]) == 2
        assert capsys.readouterr().err.strip().endswith(f"({option})")
    assert not out.exists()


def test_a_classifier_that_cannot_be_loaded_is_named_as_the_classifier(tmp_path, capsys):
    """A classifier path that was missing, no checkpoint, or a generative model was refused
    with no parameter or with "checkpoint", so the command line named no option, or
    --checkpoint (the generator, which was fine) instead of --classifier."""
    fasta = tmp_path / "not_a_checkpoint.fa"
    fasta.write_text(">x\nACGT\n")
    out = tmp_path / "x.fa"
    for classifier in (tmp_path / "missing.ckpt", fasta, "mdlm-chrx"):
        with pytest.raises(UserInputError) as refused:
            tiny().generate(1, length=8, steps=2, label="a", classifier=classifier)
        assert refused.value.parameter == "classifier"
        argv = ["sample", "--checkpoint", "species-conditional", "--out", str(out), "--length"]
        argv += ["8", "--steps", "2", "--label", "human", "--classifier", str(classifier)]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith("(--classifier)") and "--checkpoint" not in err
    assert not out.exists()


def test_generate_to_file_refuses_process_settings_it_would_ignore_or_cannot_start(tmp_path):
    """accelerator without devices was ignored (accelerator="gpu" drew on the CPU model's
    device, silently); devices=-2 was Lightning's bare TypeError."""
    out = tmp_path / "x.fa"
    with pytest.raises(InputValueError) as refused:
        tiny().generate_to_file(out, 2, 8, steps=2, accelerator="gpu")
    assert str(refused.value) == (
        "accelerator='gpu' is the device kind of several processes sharing the work and needs "
        "devices=N (N processes); for one process choose its device with device ('cuda', "
        "'cpu') instead"
    )
    assert refused.value.parameter == ("device", "devices", "accelerator")
    with pytest.raises(InputValueError, match="Lightning cannot start these processes") as no:
        tiny().generate_to_file(out, 2, 8, steps=2, accelerator="cpu", devices=-2)
    assert no.value.parameter == ("accelerator", "devices")
    assert list(tmp_path.iterdir()) == []


def test_eval_refuses_an_accelerator_it_would_ignore(capsys):
    """genodiff eval --accelerator gpu without --devices scored on --device, silently."""
    with pytest.raises(InputValueError, match="accelerator='gpu' is the device kind of") as no:
        evaluate_checkpoint("mdlm-chrx", accelerator="gpu")
    assert no.value.parameter == ("device", "devices", "accelerator")
    assert cli.main(["eval", "--checkpoint", "mdlm-chrx", "--accelerator", "cpu"]) == 2
    assert capsys.readouterr().err.strip().endswith("(--device, --devices, --accelerator)")


def test_the_cli_names_every_option_of_a_tuple_of_parameters():
    options = cli.option_names(cli.build_parser())
    assert options["batch_size"] == "--batch-size" and options["num_samples"] == "--num-samples"
    err = InputValueError("too big; lower them", parameter=("length", "batch_size"))
    assert cli.error_line(err, "sample", options) == (
        "genodiff sample: error: too big; lower them (--length, --batch-size)"
    )
    named = InputValueError("--length is too big", parameter="length")
    assert cli.error_line(named, "sample", options).endswith("--length is too big")


def test_the_cli_says_a_parameter_the_message_points_at_as_its_option():
    """A library message points at an argument by its name in parentheses (``(top_p)``): the
    command line says the option there, not a keyword it has no such argument for."""
    options = cli.option_names(cli.build_parser())
    err = InputValueError("give 0.9 (top_p) or a seed (seed)", parameter=("top_p", "seed"))
    assert cli.error_line(err, "sample", options) == (
        "genodiff sample: error: give 0.9 (--top-p) or a seed (--seed)"
    )
    # only a whole name in parentheses: a word in the prose stays, the option goes at the end
    prose = InputValueError("the seed was negative (seeds start at 0)", parameter="seed")
    assert cli.error_line(prose, "sample", options) == (
        "genodiff sample: error: the seed was negative (seeds start at 0) (--seed)"
    )


def test_score_refuses_a_str_and_an_empty_sequence_in_one_line(run):
    model = genodiff.load(run, device="cpu")
    with pytest.raises(InputValueError, match="sequences is one str: give a list"):
        model.score("ACGTACGT")
    with pytest.raises(InputValueError, match=r"sequence 1 has no token to score \(empty\)"):
        model.score(["ACGTACGT", ""])


def test_score_refuses_a_bool_number_of_noise_draws_in_one_line():
    with pytest.raises(InputValueError, match="t_samples must be an integer >= 1, got True") as no:
        tiny().score(["ACGTACGT"], t_samples=True)
    assert no.value.parameter == "t_samples"


def test_score_refuses_a_bad_number_of_noise_draws_for_no_sequences_too():
    """score([], t_samples=0) returned [] once the check moved into noise_draws (it came after
    the early return for no sequences), while score([], seed=-1) is refused."""
    with pytest.raises(InputValueError, match="t_samples must be an integer >= 1, got 0") as no:
        tiny().score([], t_samples=0)
    assert no.value.parameter == "t_samples"
    assert tiny().score([], t_samples=2) == []


def test_eval_checks_its_seed_as_score_does():
    """evaluate_checkpoint checked seed by hand (seed < 0) beside check_option for batch_size:
    seed=0.5 was taken (and failed after the model was loaded, elsewhere), seed="1" a bare
    TypeError ('<' not supported between 'str' and 'int')."""
    for seed, said in ((0.5, "seed must be an integer, got 0.5"), ("1", "seed must be")):
        with pytest.raises(InputValueError, match=said) as no:
            evaluate_checkpoint("mdlm-chrx", seed=seed)
        assert no.value.parameter == "seed"
    with pytest.raises(InputValueError, match="seed must be >= 0, got -1") as no:
        evaluate_checkpoint("mdlm-chrx", seed=-1)
    assert no.value.parameter == "seed"


def test_score_takes_numpy_integers_as_the_numbers_they_equal():
    """t_samples=np.int64(4) was refused as "t_samples must be an integer >= 1, got
    np.int64(4)", while seed and batch_size took NumPy integers (docs/python_api.md)."""
    model, sequences = tiny(), ["ACGTACGTAC", "GGCCATNNAT"]
    expected = model.score(sequences, t_samples=4, seed=3, batch_size=1)
    given = model.score(sequences, t_samples=np.int64(4), seed=np.int64(3), batch_size=np.int32(1))
    assert given == expected
    for refused in (np.int64(0), np.bool_(True)):  # NumPy's bool is no integer either
        with pytest.raises(InputValueError, match="t_samples must be an integer >= 1") as no:
            model.score(sequences, t_samples=refused)
        assert no.value.parameter == "t_samples"


def test_score_and_a_prefix_read_dna_in_either_case_as_documented():
    model = tiny()
    upper = model.score(["ACGTACGTAC", "GGCCANNRYT"], t_samples=8)
    assert model.score(["acgtacgtac", "ggccAnnryt"], t_samples=8) == upper
    options = {"length": 12, "steps": 2, "seed": 1}
    assert model.generate(2, prefix="tata", **options) == model.generate(
        2, prefix="TATA", **options
    )


def test_a_flag_that_replaces_files_must_be_a_bool(tmp_path):
    """overwrite="no" (a str, so true) replaced a saved model, a sample file or a report."""
    model = tiny()
    folder = model.save_pretrained(tmp_path / "model", weights="raw")
    samples = model.generate(2, length=8, steps=2)
    fasta = samples.save(tmp_path / "samples.fa")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    calls = {
        "save_pretrained": lambda flag: model.save_pretrained(folder, weights="raw", **flag),
        "Samples.save": lambda flag: samples.save(fasta, **flag),
        "generate_to_file": lambda flag: model.generate_to_file(fasta, 2, 8, steps=2, **flag),
        "evaluate_samples": lambda flag: genodiff.evaluate_samples(
            samples, list(samples) * 5, out=tmp_path / "quality", **flag
        ),
    }
    for name, call in calls.items():
        with pytest.raises(InputValueError) as refused:
            call({"overwrite": "no"})
        assert str(refused.value) == "overwrite must be True or False, got 'no'", name
        assert refused.value.parameter == "overwrite"
    with pytest.raises(InputValueError, match="resume must be True or False, got 1"):
        model.generate_to_file(tmp_path / "more.fa", 2, 8, steps=2, resume=1)
    with pytest.raises(InputValueError, match="portable_data must be True or False"):
        model.save_pretrained(tmp_path / "portable", weights="raw", portable_data="yes")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert model.save_pretrained(folder, weights="raw", overwrite=np.bool_(True)) == folder


def test_the_checkpoints_writers_take_overwrite_as_a_bool_too(tmp_path):
    """Model.save_pretrained refused overwrite="no", but genodiff.checkpoints.export_model
    (docs/python_api.md: the one export) and genodiff.checkpoints.save_pretrained, which it
    and genodiff export call, read it as true and replaced the saved model."""
    model = tiny()
    folder = model.save_pretrained(tmp_path / "model", weights="raw")
    backbone = tmp_path / "backbone"
    checkpoints.save_pretrained(model.network.backbone, backbone)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    writes = (
        lambda: checkpoints.export_model(model.network, folder, "raw", overwrite="no"),
        lambda: checkpoints.save_pretrained(model.network.backbone, backbone, overwrite="no"),
    )
    for write in writes:
        with pytest.raises(InputValueError) as refused:
            write()
        assert str(refused.value) == "overwrite must be True or False, got 'no'"
        assert refused.value.parameter == "overwrite"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("nothing", [None, 7])
def test_a_file_or_config_argument_that_is_no_path_is_one_line_naming_it(nothing):
    """Were os.fspath's TypeError ("expected str, bytes or os.PathLike object")."""
    model = tiny()
    samples = model.generate(2, length=8, steps=2)
    for write in (samples.save, lambda out: model.generate_to_file(out, 2, 8, steps=2)):
        with pytest.raises(InputValueError) as refused:
            write(nothing)
        expected = f"the output file must be a path (a str or a Path), got {nothing!r}"
        assert str(refused.value) == expected and refused.value.parameter == "out"
    for run in (genodiff.train, genodiff.finetune, genodiff.train_classifier):
        with pytest.raises(ConfigError) as refused:
            run(nothing)
        assert str(refused.value) == (
            f"config must be a YAML file's path or a shipped config's name (demo), got {nothing!r}"
        )


def test_save_pretrained_into_a_file_is_one_line_and_leaves_the_file(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("mine")
    with pytest.raises(InputValueError, match="taken is a file; export writes a folder"):
        tiny().save_pretrained(taken, weights="raw")
    assert taken.read_text() == "mine"


def test_save_pretrained_into_an_empty_name_is_refused_not_the_working_directory(
    tmp_path, monkeypatch
):
    """An empty folder name (e.g. an unset variable) wrote the model into the working
    directory, as Path("") is "."; load refuses the same name, so save refuses it too."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputValueError, match="the output folder is an empty name") as refused:
        tiny().save_pretrained("", weights="raw")
    assert refused.value.parameter == "out"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputValueError, match="the output folder is an empty name"):
        genodiff.checkpoints.save_pretrained(tiny().network.backbone, "")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "windows"), [("mdlm-chrx", "windows"), ("species-conditional", "class_windows")]
)
def test_windows_of_a_misspelt_split_names_the_split_before_any_data_file(name, windows):
    """mdlm-chrx's training data (chrX) does not ship: a misspelt split was reported as that
    missing file, to download; species-conditional's was a bare ValueError of its own words."""
    model = genodiff.load(name)
    with pytest.raises(InputValueError) as refused:
        getattr(model, windows)("tests")
    assert str(refused.value) == "split='tests': a run's data has the splits train, valid, test"
    assert refused.value.parameter == "split"


def test_score_names_the_sequence_holding_a_letter_it_cannot_read():
    with pytest.raises(InputValueError) as refused:
        tiny().score(["ACGTACGT", "ACGTNNAC", "ACGT\n"], t_samples=1)
    message = str(refused.value)
    assert message.startswith("sequence 2: cannot tokenize character '\\n' at position 4")
    assert "\n" not in message and refused.value.parameter == "sequences"


def test_load_of_an_empty_name_is_refused_not_read_as_the_working_directory(tmp_path, monkeypatch):
    tiny().save_pretrained(tmp_path, weights="raw")  # the working directory holds a model
    monkeypatch.chdir(tmp_path)
    assert genodiff.load(".").config["objective"]["name"] == "mdlm"  # named: read
    for nothing in ("", None):
        with pytest.raises(InputValueError, match="a checkpoint must be named by a path"):
            genodiff.load(nothing)


@pytest.mark.parametrize(
    ("front_door", "config"),
    [
        ("train", DEMO),
        ("finetune", "genomic_benchmarks_demo"),
        ("train_classifier", "classifier_demo"),
    ],
)
def test_overrides_as_one_string_or_holding_a_non_string_are_refused_in_one_line(
    front_door, config, tmp_path
):
    """A str is a sequence of its letters: each was taken as an override (Hydra's "Error
    parsing override 't'", over three lines); a number among them was a bare TypeError."""
    run = getattr(genodiff, front_door)
    with pytest.raises(ConfigError) as refused:
        run(config, "trainer.max_steps=2", output_dir=tmp_path / "out")
    expected = "overrides is one string: give a list of them, ['trainer.max_steps=2']"
    assert str(refused.value) == expected
    with pytest.raises(ConfigError) as refused:
        run(config, ["trainer.max_steps", 2], output_dir=tmp_path / "out")
    expected = "overrides must be 'key=value' strings, one of them is of type int: 2"
    assert str(refused.value) == expected
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("front_door", "config"),
    [
        ("train", DEMO),
        ("finetune", "genomic_benchmarks_demo"),
        ("train_classifier", "classifier_demo"),
    ],
)
def test_an_empty_output_dir_is_refused_not_the_working_directory(
    front_door, config, tmp_path, monkeypatch
):
    """output_dir="" (an unset variable) is Path(""), the working directory: the run wrote its
    checkpoints, logs, config and samples there, as load and save_pretrained refuse to."""
    monkeypatch.chdir(tmp_path)
    run = getattr(genodiff, front_door)
    with pytest.raises(ConfigError) as refused:
        run(config, ["trainer.max_steps=1"], output_dir="")
    assert str(refused.value) == (
        "output_dir is an empty name, which would put the run's files in the working "
        'directory; name a folder ("." for the working directory)'
    )
    with pytest.raises(ConfigError, match="output_dir is an empty name"):
        run(config, ["trainer.max_steps=1", "output_dir="])  # as the command line gives it
    with pytest.raises(ConfigError) as refused:
        run(config, ["trainer.max_steps=1"], output_dir=5)
    assert str(refused.value) == "output_dir must be a folder's path (a str or a Path), got 5"
    assert list(tmp_path.iterdir()) == []


class _ComposedError(Exception):
    """Raised instead of training, once the run's config is composed."""


@pytest.mark.parametrize(
    "given", ["runs/lr=0.002,bs=64", "runs/it's (v2) [final] #1", "~/runs/demo"]
)
def test_train_composes_the_output_dir_it_is_given_whatever_its_characters(
    given, tmp_path, monkeypatch
):
    """output_dir was passed on as the Hydra override output_dir=VALUE, unquoted: an '=', a
    comma, brackets, a quote or a '#' in a folder name were Hydra syntax ("Ambiguous value",
    "mismatched input"), and '~' named a folder '~' in the working directory, where
    genodiff.load('~/...') does not look."""
    monkeypatch.setenv("HOME", str(tmp_path))
    composed = []

    def compose_only(config, overrides):
        composed.append(load_config(config, overrides))
        raise _ComposedError

    monkeypatch.setattr(training_run, "load_config", compose_only)
    with pytest.raises(_ComposedError):
        genodiff.train(DEMO, ["trainer.max_steps=2"], output_dir=given)
    expected = str(tmp_path / "runs" / "demo") if given.startswith("~") else given
    assert composed[0].output_dir == expected


def test_a_tilde_in_an_output_path_is_the_home_folder_as_load_reads_it(tmp_path, monkeypatch):
    """genodiff.load expands '~' (as it expands the data paths and GENODIFF_MODELS_PATH);
    save_pretrained, Samples.save and generate_to_file wrote into a folder named '~' in the
    working directory instead: load('~/x') after save_pretrained('~/x') found nothing, or an
    older model saved there."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    model = tiny()
    assert model.save_pretrained("~/exported", weights="raw") == home / "exported"
    options = {"length": 16, "steps": 2, "seed": 3}
    samples = model.generate(2, **options)
    assert genodiff.load("~/exported").generate(2, **options) == samples
    assert samples.save("~/samples.fa") == home / "samples.fa"
    assert model.generate_to_file("~/streamed.fa", 2, **options).path == home / "streamed.fa"
    assert (home / "streamed.fa").read_bytes() == (home / "samples.fa").read_bytes()
    assert list(work.iterdir()) == []


def test_a_model_loaded_from_a_raw_export_is_told_how_to_save_it_again(tmp_path):
    """save_pretrained's default asks for the averaged weights, which an export of the raw ones
    lacks: the refusal named only the run's .ckpt (which a downloaded export has not), not
    weights='raw', which saves it."""
    folder = tiny().save_pretrained(tmp_path / "raw", weights="raw")
    model = genodiff.load(folder)
    with pytest.raises(InputValueError) as refused:
        model.save_pretrained(tmp_path / "again")
    assert str(refused.value) == (
        f"{folder} holds only its raw weights (an export folder): save them with "
        "weights='raw', or export the run's .ckpt for its ema weights"
    )
    assert refused.value.parameter == "weights" and not (tmp_path / "again").exists()
    again = genodiff.load(model.save_pretrained(tmp_path / "again", weights="raw"))
    assert again.generate(2, length=16, steps=2) == model.generate(2, length=16, steps=2)
