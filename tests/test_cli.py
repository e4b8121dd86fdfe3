"""End to end through the command line: train a few steps, sample, and the config errors."""

import argparse
import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from Bio import SeqIO

from genodiff import cli
from genodiff.checkpoints.io import read_checkpoint_file
from genodiff.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")
TINY = [
    "model=caduceus_tiny",
    "data.max_length=128",
    "data.batch_size=4",
    "data.eval_batch_size=8",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=2",
    "trainer.enable_progress_bar=false",
    "samples.num_samples=2",
    "samples.length=64",
    "samples.steps=8",
]


def read_metrics(run: Path, version: int = 0) -> list[dict]:
    with open(run / "logs" / f"version_{version}" / "metrics.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    assert cli.main(["train", DEMO, *TINY, f"output_dir={out}"]) == 0
    return out


def test_train_writes_checkpoints_logs_and_samples(trained_run):
    assert (trained_run / "checkpoints" / "last.ckpt").is_file()
    assert list((trained_run / "checkpoints").glob("best-step*.ckpt"))
    assert not (trained_run / ".lock").exists()  # a run that ended leaves no lock file
    assert (trained_run / "tokenizer.json").is_file()
    rows = read_metrics(trained_run)
    val = [float(r["val/nelbo"]) for r in rows if r.get("val/nelbo")]
    ppl = [float(r["val/ppl"]) for r in rows if r.get("val/ppl")]
    assert len(val) == 2  # validation at steps 2 and 4
    assert all(v > 0 for v in val)
    assert ppl[-1] == pytest.approx(math.exp(val[-1]), rel=1e-5)
    (test,) = [r for r in rows if r.get("test/nelbo")]  # the best checkpoint on the test split
    assert float(test["test/ppl"]) == pytest.approx(math.exp(float(test["test/nelbo"])), rel=1e-5)
    records = list(SeqIO.parse(trained_run / "samples.fa", "fasta"))
    assert len(records) == 2
    assert all(len(r.seq) == 64 and set(str(r.seq)) <= set("ACGTN") for r in records)


def test_metrics_rows_count_the_optimizer_steps_done(trained_run):
    # 4 steps, validation every 2: after steps 2 and 4, and the best checkpoint is named by
    # the step of a validation row (best-step2.ckpt or best-step4.ckpt)
    rows = read_metrics(trained_run)
    validated = sorted(int(r["step"]) for r in rows if r.get("val/nelbo"))
    assert validated == [2, 4]
    (best,) = (trained_run / "checkpoints").glob("best-step*.ckpt")
    assert int(best.stem.removeprefix("best-step")) in validated
    last = read_checkpoint_file(trained_run / "checkpoints" / "last.ckpt")
    assert max(int(r["step"]) for r in rows) == last["global_step"] == 4
    assert {r["epoch"] for r in rows if r.get("epoch")} == {"0"}  # one epoch, counted from 0


def test_sample_command_is_seeded_and_traceable(trained_run, tmp_path):
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    args = [
        "sample",
        "--checkpoint",
        str(ckpt),
        "--num-samples",
        "3",
        "--length",
        "40",
        "--steps",
        "10",
        "--seed",
        "7",
    ]
    assert cli.main([*args, "--out", str(tmp_path / "a.fa")]) == 0
    assert cli.main([*args, "--out", str(tmp_path / "b.fa")]) == 0
    a = list(SeqIO.parse(tmp_path / "a.fa", "fasta"))
    b = list(SeqIO.parse(tmp_path / "b.fa", "fasta"))
    assert [str(r.seq) for r in a] == [str(r.seq) for r in b]
    assert [r.id for r in a] == ["sample_0_seed7", "sample_1_seed7", "sample_2_seed7"]
    assert f"checkpoint={ckpt}" in a[0].description and "steps=10" in a[0].description


def test_resume_continues_from_last_checkpoint(trained_run, tmp_path):
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    out = tmp_path / "resumed"
    overrides = [o for o in TINY if not o.startswith("trainer.max_steps")]
    args = [
        "train",
        DEMO,
        *overrides,
        "trainer.max_steps=6",
        f"ckpt_path={ckpt}",
        f"output_dir={out}",
        "samples.num_samples=0",
    ]
    assert cli.main(args) == 0
    rows = read_metrics(out)
    steps = {int(r["step"]) for r in rows if r.get("val/nelbo")}
    assert steps == {6}  # only the validation after the resumed steps 5 and 6

    # ckpt_path=last picks up output_dir/checkpoints/last.ckpt (now at step 6)
    args = [a for a in args if not a.startswith(("ckpt_path=", "trainer.max_steps="))]
    assert cli.main([*args, "ckpt_path=last", "trainer.max_steps=8"]) == 0
    assert {int(r["step"]) for r in read_metrics(out, 1) if r.get("val/nelbo")} == {8}
    assert read_metrics(out, 0) == rows  # the first resumed run's log is kept


def test_misspelt_key_lists_valid_keys(capsys, tmp_path):
    code = cli.main(["train", DEMO, "trainer.max_stepz=3", f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "trainer.max_stepz" in err and "max_steps" in err
    code = cli.main(["train", DEMO, "model.d_modle=32", f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "model.d_modle" in err and "d_model" in err
    assert not (tmp_path / "checkpoints").exists()


def test_a_run_whose_samples_name_a_sampler_its_objective_lacks_names_the_key(capsys, tmp_path):
    # Was: "SEDD has no sampler 'cached'; choose one of: analytic, euler", which named no
    # setting (the sample command's --sampler is no key of a run's config).
    sedd = str(ROOT / "configs" / "hg38_sedd.yaml")
    args = ["train", sedd, "data=demo", "trainer=cpu", *TINY, "samples.sampler=cached"]
    assert cli.main([*args, f"output_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    expected = (
        "samples.sampler=cached: SEDD has no sampler 'cached'; choose one of: analytic, euler"
    )
    assert err == f"genodiff train: error: {expected}"
    assert not (tmp_path / "run").exists()


def test_group_override_swaps_data(capsys, tmp_path, monkeypatch):
    from genodiff.config import load_config

    cfg = load_config(ROOT / "configs" / "hg38.yaml", ["data=demo", "trainer=cpu"])
    assert cfg.data.name == "fasta" and cfg.data.fasta.endswith("chr22_20-21Mb.fa.gz")
    assert cfg.trainer.accelerator == "cpu"
    assert cfg.model.d_model == 118  # the experiment's own choices stay


def test_an_experiment_file_elsewhere_that_extends_the_demo_finds_its_genome(tmp_path, monkeypatch):
    """``defaults: [demo]`` in a file outside the repository, run from its own folder: the
    demo's ``data/chr22_20-21Mb.fa.gz`` is the shipped genome (was "FASTA file not found:
    <that folder>/data/chr22_20-21Mb.fa.gz"), and a path of the user's own stays theirs."""
    from genodiff.config import load_config

    (tmp_path / "mine.yaml").write_text("defaults:\n  - demo\n  - _self_\n")
    (tmp_path / "own.fa").write_text(">r\nACGT\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(tmp_path / "mine.yaml")
    assert Path(cfg.data.fasta) == (ROOT / "data" / "chr22_20-21Mb.fa.gz").resolve()
    cfg = load_config(tmp_path / "mine.yaml", ["data.fasta=own.fa"])
    assert Path(cfg.data.fasta) == tmp_path / "own.fa"


def test_missing_hg38_fails_before_model_setup(capsys, tmp_path, monkeypatch):
    import genodiff.training.module

    def no_model(*args, **kwargs):
        raise AssertionError("the model was built before the data check")

    monkeypatch.setattr(genodiff.training.module.GenerativeTrainingModule, "__init__", no_model)
    monkeypatch.chdir(tmp_path)
    code = cli.main(
        [
            "train",
            str(ROOT / "configs" / "hg38.yaml"),
            f"data.fasta={tmp_path}/nohg38/hg38.ml.fa",
            f"data.bed={tmp_path}/nohg38/human-sequences.bed",
            f"output_dir={tmp_path / 'out'}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "nohg38" in err and "genodiff data hg38" in err


def test_export_command_writes_a_loadable_folder(trained_run, tmp_path, capsys):

    from genodiff.checkpoints import load_pretrained
    from genodiff.training.module import GenerativeTrainingModule

    ckpt = trained_run / "checkpoints" / "last.ckpt"
    out = tmp_path / "exported"
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(out)]) == 0
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    model = load_pretrained(out)
    ema = GenerativeTrainingModule.load_from_checkpoint(
        ckpt, map_location="cpu"
    ).eval_backbone.eval()
    ids = torch.randint(7, 11, (2, 32))
    with torch.no_grad():
        assert torch.equal(model(ids), ema(ids))
    # an existing folder is never overwritten silently
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(out)]) == 2
    assert "exist" in capsys.readouterr().err


def commands_of(parser: argparse.ArgumentParser, name: str = "genodiff"):
    """(``genodiff COMMAND [SUBCOMMAND]``, its parser) for the parser and every command in it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from commands_of(sub, f"{name} {command}")


def test_every_option_of_every_command_says_what_it_is():
    # argparse lists an option without help as its bare name: a user learns nothing of it
    # (was: eval --seed)
    unexplained = [
        f"{name} {action.option_strings[-1]}"
        for name, parser in commands_of(cli.build_parser())
        for action in parser._actions
        if action.option_strings and not action.help
    ]
    assert len(list(commands_of(cli.build_parser()))) > 10  # the commands were found
    assert unexplained == []


def test_train_help_reads_the_configs_it_names_without_omegaconf():
    """docs/install.md: a command's --help answers at once. The list of shipped configs that
    ends `genodiff train --help` is read with PyYAML alone: OmegaConf's pure-Python reader
    made the help 4x slower than any other (0.45 s against 0.1 s)."""
    code = (
        "import sys\nfrom genodiff import cli\ntry:\n    cli.main(['train', '--help'])\n"
        "except SystemExit:\n    pass\nprint('omegaconf' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Shipped configs" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_train_help_names_the_configs_train_takes_and_how_to_resume(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["train", "--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert "ckpt_path=last" in shown
    listed = shown.partition("Shipped configs (a name works from any folder): ")[2]
    listed = set(listed.rstrip(".").split(", "))
    # Each experiment YAML of the core's configs/ is listed exactly when the training config
    # loader takes it (fine-tuning and classifier configs it refuses).
    for file in sorted((ROOT / "configs").glob("*.yaml")):
        try:
            load_config(file.stem)
            takes = True
        except ConfigError:
            takes = False
        assert (file.stem in listed) == takes, file.stem


def test_overrides_on_both_sides_of_an_option_are_all_taken(monkeypatch):
    """``train demo a=1 --no-progress b=2``: argparse leaves ``b=2`` unparsed (was refused as
    "unrecognized arguments: b=2"); it is an override like ``a=1``, in the order typed, while
    a mistyped option is still refused."""
    taken = {}

    def record(config, overrides, progress):
        taken.update(config=config, overrides=overrides, progress=progress)

    monkeypatch.setattr("genodiff.training.run.train", record)
    args = ["train", "demo", "a=1", "--no-progress", "b=2", "+c=3", "~d", "e=4"]
    assert cli.main(args) == 0
    assert taken == {"config": "demo", "overrides": ["a=1", "b=2", "+c=3", "~d", "e=4"],
                     "progress": False}  # fmt: skip
    with pytest.raises(SystemExit):
        cli.main(["train", "demo", "a=1", "--no-progess", "b=2"])
