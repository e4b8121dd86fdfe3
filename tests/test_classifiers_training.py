"""``genodiff classifier``: training guidance classifiers end to end on a separable toy
(poly-A vs poly-C windows), what their checkpoints hold, and the loader's and the command's
refusals (genodiff/classifiers/)."""

import contextlib
import io
import logging
import shutil
import warnings
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.checkpoints.io import CLASSIFIER_RECORD_KEY, read_checkpoint_file
from genodiff.classifiers import load_classifier
from genodiff.classifiers.noise import inputs_at_time
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.model import GenerativeModel
from genodiff.processes.masked import MaskedForwardProcess
from genodiff.processes.schedules import LogLinearSchedule
from genodiff.tokenizers import DNATokenizer
from tests.checkpoint_files import save_as_trained

ROOT = Path(__file__).resolve().parents[1]
TOK = DNATokenizer()
LENGTH = 32

TOY_CONFIG = """\
defaults:
  - classifier_demo
  - _self_
name: toy_classifier
generator: {generator}
model:
  d_model: 16
  n_layer: 1
data:
  root: null
  task: null
  fasta_by_label:
    poly_a: {poly_a}
    poly_c: {poly_c}
  max_length: {length}
  rc_aug: false
  batch_size: 16
  eval_batch_size: 64
optim:
  lr: 1.0e-2
  weight_decay: 0.0
  warmup_fraction: 0.0
trainer:
  max_steps: 30
  val_check_interval: 30
  log_every_n_steps: 10
  enable_progress_bar: false
"""


def write_generator(
    path: Path, classes=None, objective="mdlm", model=None, data=None, **objective_options
) -> Path:
    """A (untrained) generator checkpoint as genodiff train writes one: config, weights,
    tokenizer; ``data``: a data config to record (default: none)."""
    config = {
        "model": model or {"name": "caduceus", "d_model": 8, "n_layer": 1},
        "objective": {"name": objective, **objective_options},
        "ema": {"decay": 0.0},
    }
    if classes:
        config["conditioning"] = {"labels": classes}
    if data:
        config["data"] = data
    return save_as_trained(path, GenerativeModel(config))


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy(tmp_path_factory.mktemp("toy"))


def write_toy(folder: Path) -> tuple[Path, Path]:
    """The toy config (and its FASTA files) and a conditional MDLM generator for its classes,
    written into ``folder``."""
    for name, base in (("poly_a", "A"), ("poly_c", "C")):
        (folder / f"{name}.fa").write_text(f">{name}\n{base * 4000}\n")
    generator = write_generator(folder / "generator.ckpt", ["poly_a", "poly_c"])
    config = folder / "toy.yaml"
    config.write_text(
        TOY_CONFIG.format(
            generator=generator,
            poly_a=folder / "poly_a.fa",
            poly_c=folder / "poly_c.fa",
            length=LENGTH,
        )
    )
    return config, generator


@pytest.fixture(scope="module")
def noisy_run(toy, tmp_path_factory):
    """``genodiff classifier`` on the toy: its output folder and what it printed."""
    config, _ = toy
    out = tmp_path_factory.mktemp("noisy") / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["classifier", str(config), f"output_dir={out}", "--no-progress"]) == 0
    return out, printed.getvalue()


def windows(base: str, n: int) -> torch.Tensor:
    return torch.full((n, LENGTH), TOK.encode(base)[0])


def test_a_noisy_classifier_learns_the_toy_on_clean_and_noisy_inputs(noisy_run):
    out, printed = noisy_run
    assert "class 0 poly_a" in printed and "class 1 poly_c" in printed
    assert "genodiff: validation accuracy: acc " in printed and "acc_t0.5 " in printed
    header = (out / "logs" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"val/acc", "val/acc_clean", "val/acc_t0.25", "val/acc_t0.5", "val/acc_t0.75"} <= set(
        header
    )
    guide = load_classifier(out / "checkpoints" / "last.ckpt")
    ids = torch.cat([windows("A", 100), windows("C", 100)])  # (200, L)
    labels = torch.arange(2).repeat_interleave(100)
    process = MaskedForwardProcess(TOK.mask_id, TOK.pad_id, LogLinearSchedule())
    for t in (0.0, 0.5, 0.75):
        noisy = inputs_at_time(process, ids, t, torch.Generator().manual_seed(0))
        with torch.no_grad():
            accuracy = (guide.classifier(noisy).argmax(-1) == labels).float().mean().item()
        assert accuracy >= 0.95, (t, accuracy)


def test_a_classifier_checkpoint_holds_its_classes_tokenizer_kind_and_generator(noisy_run, toy):
    out, _ = noisy_run
    _, generator = toy
    guide = load_classifier(out)  # a run's folder names its last.ckpt
    assert guide.kind == "noisy"
    assert guide.class_names == ["poly_a", "poly_c"]
    assert guide.tokenizer_name == "dna"
    assert guide.generator_objective["name"] == "mdlm"
    assert guide.generator_objective["mask_id"] == TOK.mask_id
    x = torch.full((2, LENGTH), TOK.mask_id)
    where = torch.ones_like(x, dtype=torch.bool)
    tilt = guide.tilt(x, 0, where, exact=False)  # (2, L, V)
    a, c = TOK.encode("A")[0], TOK.encode("C")[0]
    assert (tilt[..., a] > tilt[..., c]).all()  # an A makes poly_a likelier
    assert guide.tilt(x, 1, where, exact=True)[..., c].gt(0).all()


def test_guiding_longer_sequences_than_the_classifier_read_warns(noisy_run, toy):
    """The toy classifier trained on windows of LENGTH bp (its config's data.max_length):
    guiding LENGTH + 8 bp warns, naming both lengths; LENGTH bp, or semi-ar blocks of LENGTH
    bp over a longer sequence (the classifier reads a block at a time), do not."""
    out, _ = noisy_run
    _, generator = toy
    guide = load_classifier(out)
    assert guide.trained_length == LENGTH
    model = genodiff.load(str(generator))
    guided = {"label": "poly_a", "classifier": guide, "steps": 2, "seed": 0}
    with pytest.warns(UserWarning, match=rf"guiding {LENGTH + 8} bp .* windows of {LENGTH} bp"):
        model.generate(1, LENGTH + 8, **guided)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="guiding")
        model.generate(1, LENGTH, **guided)
        semi_ar = {"sampler": "semi-ar", "block": LENGTH, "stride": LENGTH // 2}
        model.generate(1, 2 * LENGTH, **guided, **semi_ar)


def test_info_says_a_classifier_checkpoint_is_a_guidance_classifier(noisy_run, capsys):
    out, _ = noisy_run
    assert cli.main(["info", str(out / "checkpoints" / "last.ckpt")]) == 0
    text = capsys.readouterr().out
    holds = next(line for line in text.splitlines() if line.startswith("holds"))
    assert "noisy guidance classifier of poly_a, poly_c (genodiff classifier)" in holds
    assert "classes:     poly_a, poly_c\n" in text  # no null label: that is a generator's


def test_a_causal_classifier_trains_on_prefixes_without_a_generator(toy, tmp_path):
    config, _ = toy
    out = tmp_path / "causal"
    args = [
        "classifier",
        str(config),
        "kind=causal",
        "generator=null",
        "model=mamba",
        "model.d_model=16",
        "model.n_layer=1",
        "trainer.max_steps=20",
        "trainer.val_check_interval=10",
        f"output_dir={out}",
        "--no-progress",
    ]
    assert cli.main(args) == 0
    guide = load_classifier(out / "checkpoints" / "last.ckpt", kind="causal")
    assert guide.kind == "causal" and guide.generator_objective is None
    prefix = windows("A", 1)[:, :5]
    scores = guide.next_token_scores(prefix, torch.tensor(TOK.sample_ids), 0)  # (1, 4)
    assert scores.exp().max() <= 1 and scores[0, 0] > -0.1  # poly_a after AAAAA + A
    with pytest.raises(InputValueError, match="causal classifier.*needs a noisy one"):
        guide.tilt(prefix, 0, torch.ones_like(prefix, dtype=torch.bool), exact=False)


# ---------------------------------------------------------------------------------- refusals


def test_the_loader_refuses_missing_damaged_generator_and_wrong_kind_checkpoints(
    noisy_run, toy, tmp_path
):
    out, _ = noisy_run
    _, generator = toy
    good = out / "checkpoints" / "last.ckpt"
    with pytest.raises(InputFileNotFoundError, match="not found"):
        load_classifier(tmp_path / "absent.ckpt")
    damaged = tmp_path / "damaged.ckpt"
    shutil.copy(good, damaged)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(InputValueError, match="damaged|not a loadable"):
        load_classifier(damaged)
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(InputValueError, match="not a loadable"):
        load_classifier(truncated)
    with pytest.raises(InputValueError, match="not a guidance classifier"):
        load_classifier(generator)
    with pytest.raises(InputValueError, match="is a noisy classifier; causal is needed"):
        load_classifier(good, kind="causal")


@pytest.mark.parametrize(
    "entry, value",
    [
        ("kind", None),
        ("model", None),
        ("class_names", [0, 1]),
        ("generator_objective", None),
    ],
)
def test_an_edited_classifier_record_is_one_line_naming_the_entry(
    noisy_run, tmp_path, entry, value
):
    out, _ = noisy_run
    content = read_checkpoint_file(out / "checkpoints" / "last.ckpt")  # allow-listed
    record = content[CLASSIFIER_RECORD_KEY]
    if value is None:
        del record[entry]
    else:
        record[entry] = value
    edited = tmp_path / "edited.ckpt"
    torch.save(content, edited)
    with pytest.raises(InputValueError, match=f"no valid {entry}; the checkpoint was edited"):
        load_classifier(edited, generator_objective="mdlm")


def test_a_classifier_is_not_taken_for_a_generator(noisy_run, tmp_path, capsys):
    out, _ = noisy_run
    samples = tmp_path / "samples.fa"
    args = ["sample", "--checkpoint", str(out / "checkpoints" / "last.ckpt"), "--out", str(samples)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "is a guidance classifier" in err and err.endswith("its classifier (--classifier)")
    assert not samples.exists()


def run_refused(capsys, config: Path, *overrides: str) -> str:
    capsys.readouterr()
    assert cli.main(["classifier", str(config), *overrides, "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    return error


def test_the_command_refuses_generators_that_do_not_fit_before_writing(
    toy, tmp_path, capsys, caplog
):
    config, _ = toy
    caplog.set_level(logging.INFO)
    out = tmp_path / "never"
    other = write_generator(tmp_path / "other.ckpt", ["human", "phage"])
    ar = write_generator(
        tmp_path / "ar.ckpt", model={"name": "mamba", "d_model": 8, "n_layer": 1}, objective="ar"
    )
    unconditional = write_generator(tmp_path / "unconditional.ckpt")
    assert "kind=noisy needs generator=PATH" in run_refused(
        capsys, config, "generator=null", f"output_dir={out}"
    )
    assert "trained on the classes human, phage, and the data's are" in run_refused(
        capsys, config, f"generator={other}", f"output_dir={out}"
    )
    assert "is a ar model" in run_refused(capsys, config, f"generator={ar}", f"output_dir={out}")
    assert "causal backbone" in run_refused(
        capsys, config, "kind=causal", "model=caduceus_tiny", f"output_dir={out}"
    )
    # Lightning's "INFO: Seed set to 0" (on stderr wherever its handler writes) is no second line
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("lightning")]
    shipped = ROOT / "configs" / "classifier_demo.yaml"
    assert "data=labelled" in run_refused(capsys, shipped, "data=demo", f"output_dir={out}")
    assert not out.exists()
    # an unconditional generator has no classes to disagree with: it is taken
    assert (
        cli.main(
            [
                "classifier",
                str(config),
                f"generator={unconditional}",
                "trainer.max_steps=2",
                "trainer.val_check_interval=2",
                "trainer.limit_val_batches=1",
                f"output_dir={out}",
                "--no-progress",
            ]
        )
        == 0
    )
    assert (out / "checkpoints" / "last.ckpt").is_file()
