"""Bad config values fail before anything is written: exit 2 and one line
``genodiff train: error: <key>: <what is wrong and what to do>``. Types come from the
annotations of the dataclass fields / constructor arguments a section feeds, ranges from the
``config_ranges`` the classes declare (``genodiff.config_values``)."""

from __future__ import annotations

import dataclasses
import inspect
import os
from pathlib import Path
from typing import Literal

import lightning
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

import genodiff
from genodiff import cli, registry
from genodiff.backbones import Capabilities
from genodiff.backbones.hyena import HyenaOperator
from genodiff.backbones.mamba import Mamba
from genodiff.config import (
    SECTION_DATACLASSES,
    TRAINER_RANGES,
    TRAINER_RESERVED,
    RunConfig,
    load_config,
)
from genodiff.config_values import (
    ConfigError,
    Key,
    Range,
    class_spec,
    dataclass_spec,
    describe,
    fits,
)
from genodiff.data import genome
from genodiff.data.benchmarks import load_task
from genodiff.model import GenerativeModel
from genodiff.objectives.d3pm import D3PM
from genodiff.objectives.mdlm import MDLM
from genodiff.samplers.request import SampleRequest
from genodiff.training.trainer import build_trainer
from tests.test_cli import DEMO, ROOT, TINY

# Cheap settings first: should a bad value get through, the run is short.
QUICK = [
    "data.max_length=128",
    "data.batch_size=2",
    "trainer.max_steps=1",
    "trainer.limit_val_batches=1",
    "trainer.enable_progress_bar=false",
    "evaluate_test=false",
    "samples.num_samples=0",
]


def train(capsys, out: Path, *overrides: str, config: str = DEMO) -> tuple[int, str]:
    code = cli.main(["train", config, *QUICK, *overrides, f"output_dir={out}"])
    return code, capsys.readouterr().err


def error_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if x.startswith("genodiff train: error:")]
    return line


BAD_VALUES = [
    # (override, the key the message names, a fragment saying what is wrong or what to do)
    ("trainer.max_steps=abc", "trainer.max_steps", "expected an integer, got 'abc'"),
    ("trainer.max_steps=2.5", "trainer.max_steps", "expected an integer"),
    ("optim.lr=abc", "optim.lr", "expected a number, got 'abc'"),
    ("seed=abc", "seed", "expected an integer, got 'abc'"),
    ("seed=-1", "seed", "out of range"),
    ("optim.lr=inf", "optim.lr", "not a finite number"),
    ("optim.lr=nan", "optim.lr", "not a finite number"),
    ("optim.lr=-1", "optim.lr", "at least 0"),
    ("model.d_model=-3", "model.d_model", "at least 1"),
    ("model.n_layer=0", "model.n_layer", "at least 1"),
    ("model.n_layer=true", "model.n_layer", "expected an integer"),
    ("ema.decay=2", "ema.decay", "in [0, 1]"),
    ("ema.decay=-0.5", "ema.decay", "in [0, 1]"),
    ("optim.warmup_fraction=2", "optim.warmup_fraction", "in [0, 1)"),
    ("optim.warmup_fraction=1", "optim.warmup_fraction", "in [0, 1)"),
    ("optim.min_lr_ratio=5", "optim.min_lr_ratio", "in [0, 1]"),
    ("optim.betas=[0.9,1.5]", "optim.betas", "in [0, 1)"),
    ("optim.betas=[0.9]", "optim.betas", "a list of 2 numbers"),
    ("trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches", "at least 1"),
    ("trainer.precision=17", "trainer.precision", "'bf16-mixed'"),
    ("data.batch_size=0", "data.batch_size", "at least 1"),
    ("samples.steps=0", "samples.steps", "in [1, 1000000]"),
    ("objective.eval_t_samples=0", "objective.eval_t_samples", "at least 1"),
    ("model.ssm_cfg.d_stat=3", "model.ssm_cfg.d_stat", "Valid keys here: bias, conv_bias"),
    ("model.ssm_cfg.d_state=0", "model.ssm_cfg.d_state", "at least 1"),
    ("model.ssm_cfg.expand=two", "model.ssm_cfg.expand", "expected an integer"),
    (
        "model.initializer_cfg.initalizer_range=0.1",
        "model.initializer_cfg.initalizer_range",
        "did you mean 'model.initializer_cfg.initializer_range'",
    ),
    (
        "model.initializer_cfg.n_residuals_per_layer=0",
        "model.initializer_cfg.n_residuals_per_layer",
        "at least 1",
    ),
    (
        "model.initializer_cfg.initializer_range=-0.02",
        "model.initializer_cfg.initializer_range",
        "at least 0",
    ),
    (
        "model.initializer_cfg.rescale_prenorm_residual=maybe",
        "model.initializer_cfg.rescale_prenorm_residual",
        "expected true or false",
    ),
    ("model.vocab_size=4", "model.vocab_size", "smaller than the dna tokenizer's 12 ids"),
]


@pytest.mark.parametrize(("override", "key", "says"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_bad_value_fails_before_anything_is_written(capsys, tmp_path, override, key, says):
    out = tmp_path / "out"
    code, err = train(capsys, out, override)
    assert code == 2
    line = error_line(err)
    assert key in line and says in line
    assert not out.exists()


def test_the_error_starts_with_the_key_and_says_what_to_do(capsys, tmp_path):
    code, err = train(capsys, tmp_path / "out", "optim.lr=abc")
    assert code == 2
    assert error_line(err) == (
        "genodiff train: error: optim.lr: expected a number, got 'abc' (a string); "
        "set e.g. optim.lr=0.001 (the default)"
    )
    code, err = train(capsys, tmp_path / "out", "ema.decay=2")
    assert error_line(err) == (
        "genodiff train: error: ema.decay: 2 is out of range; set a value in [0, 1] "
        "(0 turns the average off)"
    )


@pytest.mark.parametrize("model", ["hyena", "mamba"])
def test_causal_backbones_check_their_initializer_cfg_keys(capsys, tmp_path, model):
    override = "model.initializer_cfg.n_residual=2"
    code, err = train(capsys, tmp_path / "out", "objective=ar", f"model={model}", override)
    assert code == 2 and "unknown config key 'model.initializer_cfg.n_residual'" in error_line(err)
    assert not (tmp_path / "out").exists()


def test_hyena_layer_keys_are_checked(capsys, tmp_path):
    code, err = train(capsys, tmp_path / "out", "objective=ar", "model=hyena", "model.layer.w=x")
    assert code == 2 and "model.layer.w: expected a number" in error_line(err)
    code, err = train(capsys, tmp_path / "out", "objective=ar", "model=hyena", "model.layer.wx=1")
    assert code == 2 and "unknown config key 'model.layer.wx'" in error_line(err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("key", ["lr", "wd", "lr_pos_emb"])
def test_a_negative_hyena_filter_setting_is_refused_before_anything_is_written(
    key, capsys, tmp_path
):
    # the filter's own learning rate and weight decay go to AdamW (genodiff.training.optim)
    hyena = ["objective=ar", "model=hyena", f"model.layer.{key}=-1"]
    code, err = train(capsys, tmp_path / "out", *hyena)
    line = error_line(err)
    assert code == 2 and f"model.layer.{key}: -1 is out of range" in line and "at least 0" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("override", "key", "meant"),
    [
        ("trainer.max_step=2", "trainer.max_step", "trainer.max_steps"),  # Lightning's keyword
        ("tranier.max_steps=2", "tranier", "trainer"),  # a section
        ("model.d_modle=8", "model.d_modle", "model.d_model"),  # a class's keyword
        ("model.ssm_cfg.d_stat=8", "model.ssm_cfg.d_stat", "model.ssm_cfg.d_state"),  # nested
        ("samples.stesp=8", "samples.stesp", "samples.steps"),  # a dataclass's field
    ],
)
def test_a_mistyped_key_names_the_key_meant(capsys, tmp_path, override, key, meant):
    code, err = train(capsys, tmp_path / "out", override)
    assert code == 2 and f"unknown config key '{key}' (did you mean '{meant}'?)" in err
    assert not (tmp_path / "out").exists()
    code, err = train(capsys, tmp_path / "out", "model.zzzzzz=8")  # nothing close: no guess
    assert code == 2 and "did you mean" not in err and "Valid keys here: " in err


def test_values_that_fit_still_load():
    cfg = load_config(
        DEMO,
        ["name=2024", "optim.lr=1e-3", "trainer.precision=bf16-mixed", "ema.decay=0"],
    )
    assert cfg.output_dir.endswith("outputs/2024") and cfg.ema.decay == 0


def test_a_misspelt_group_option_is_one_line_naming_the_option_meant(capsys, tmp_path):
    # Was: Hydra's message, the options one a line (docs/troubleshooting.md: one line).
    code, err = train(capsys, tmp_path / "out", "model=mambaa")
    assert code == 2 and err.strip() == error_line(err)  # nothing but that one line
    assert "model=mambaa: no such option in the config group 'model'" in err
    assert "(did you mean model=mamba?)" in err
    shipped = sorted(p.stem for p in (ROOT / "configs" / "model").glob("*.yaml"))
    listed = err.split("choose one of: ")[1].strip().split(", ")
    assert set(shipped) <= set(listed)  # every shipped option (plugins may add theirs)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["null", "NULL", ""])
def test_a_group_set_to_null_or_nothing_is_one_line_listing_its_options(capsys, tmp_path, value):
    # Was: null a traceback (Hydra's ValueError: "Config group override must be a string or
    # a list. Got NoneType"); nothing Hydra's message, the options one a line.
    code, err = train(capsys, tmp_path / "out", f"data={value}")
    assert code == 2 and err.strip() == error_line(err)
    assert f"data={value}: no such option in the config group 'data'; choose one of: " in err
    shipped = sorted(p.stem for p in (ROOT / "configs" / "data").glob("*.yaml"))
    assert set(shipped) <= set(err.split("choose one of: ")[1].strip().split(", "))
    assert not (tmp_path / "out").exists()


def test_a_key_the_yaml_lacks_given_twice_takes_the_last_value_as_a_key_it_holds_does():
    # Was: refused, saying the YAML set it and to drop a "+" the user never wrote. The
    # reference: a key demo.yaml holds (trainer.max_steps), given twice, takes the last value.
    twice = ["trainer.max_steps=7", "trainer.max_steps=9"]
    assert "limit_val_batches" not in load_config(DEMO).trainer  # the YAML lacks it
    twice += ["trainer.limit_val_batches=3", "trainer.limit_val_batches=5"]
    cfg = load_config(DEMO, twice)
    assert cfg.trainer.max_steps == 9
    assert cfg.trainer.limit_val_batches == 5
    for plus in ("+", "++"):  # added with Hydra's own syntax first
        again = [f"{plus}trainer.limit_val_batches=3", "trainer.limit_val_batches=5"]
        assert load_config(DEMO, again).trainer.limit_val_batches == 5


def test_a_gpu_accelerator_without_a_visible_gpu_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for accelerator in ("gpu", "cuda"):
        code, err = train(capsys, tmp_path / "out", f"trainer.accelerator={accelerator}")
        assert code == 2
        line = error_line(err)
        assert line.startswith("genodiff train: error: trainer.accelerator:")
        assert "no GPU is visible" in line and "trainer.accelerator=cpu" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["model=mamba"], "a diffusion objective needs a bidirectional backbone"),
        (["model=hyena"], "a diffusion objective needs a bidirectional backbone"),
        (["objective=ar"], "next-token prediction needs a causal backbone"),
    ],
)
def test_objective_and_backbone_causality_must_agree(capsys, tmp_path, overrides, says):
    out = tmp_path / "out"
    code, err = train(capsys, out, *overrides)
    assert code == 2
    line = error_line(err)
    assert says in line and "objective.name=" in line and "model.name=" in line
    assert not out.exists()


def test_objective_ar_takes_the_keys_an_experiment_sets_for_diffusion():
    # demo.yaml sets objective.eval_t_samples; objective=ar (with a causal backbone) takes it.
    cfg = load_config(DEMO, ["objective=ar", "model=mamba", "model.d_model=16", "model.n_layer=1"])
    assert cfg.objective.eval_t_samples == 4
    model = GenerativeModel(OmegaConf.to_container(cfg, resolve=True))
    assert model.objective.eval_t_samples == 1  # deterministic: one pass is exact


def test_the_cached_sampler_with_time_conditioning_is_refused_by_name():
    cached = SampleRequest(num_samples=1, length=8, sampler="cached")
    for objective in (
        MDLM(mask_id=4, pad_id=5, time_conditioning=True),
        D3PM(mask_id=4, pad_id=5, time_conditioning=True),
    ):
        with pytest.raises(ValueError, match="time conditioning"):
            objective.sampler_name(cached)
    assert MDLM(mask_id=4, pad_id=5).sampler_name(cached) == "cached"


class TimeConditioned(nn.Module):
    """A tiny backbone that declares time conditioning (as the text plugin's DiT does)."""

    def __init__(self, vocab_size: int, d_model: int = 8) -> None:
        super().__init__()
        self.capabilities = Capabilities(
            vocab_size=vocab_size, hidden_size=d_model, time_conditioning=True
        )
        self.embed, self.out = nn.Embedding(vocab_size, d_model), nn.Linear(d_model, vocab_size)

    def forward(self, input_ids, sigma=None):
        hidden = self.embed(input_ids)
        if sigma is not None:
            hidden = hidden + sigma[:, None, None].to(hidden.dtype)
        return self.out(hidden).float()


TIME_CONDITIONED_RUN = """
name: tc
model: {name: time_conditioned, d_model: 8}
objective: {name: mdlm, time_conditioning: true}
data: {name: fasta, max_length: 64, batch_size: 2, eval_batch_size: 2}
trainer: {accelerator: cpu, max_steps: 1, limit_val_batches: 1, enable_progress_bar: false}
evaluate_test: false
samples: {num_samples: 1, length: 16, steps: 4, sampler: cached}
"""


def test_time_conditioning_with_the_cached_sampler_fails_before_training(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.setitem(registry._REGISTRIES["backbone"], "time_conditioned", TimeConditioned)
    config = tmp_path / "tc.yaml"
    config.write_text(TIME_CONDITIONED_RUN)
    out = tmp_path / "out"
    code = cli.main(["train", str(config), f"output_dir={out}"])
    line = error_line(capsys.readouterr().err)
    assert code == 2
    assert "sampler 'cached' needs a model without time conditioning" in line
    assert not out.exists()


def test_output_dir_that_is_a_file(capsys, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    code, err = train(capsys, target)
    assert code == 2
    assert "output_dir=" in error_line(err) and "is a file; choose a folder" in error_line(err)
    assert target.read_text() == "mine\n"


def test_init_from_with_another_runs_checkpoint_is_refused(capsys, tmp_path):
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    other = tmp_path / "other" / "checkpoints" / "last.ckpt"
    out = tmp_path / "out"
    code, err = train(capsys, out, f"init_from={pretrained}", f"ckpt_path={other}")
    assert code == 2
    line = error_line(err)
    assert line.startswith("genodiff train: error: init_from:") and "keep one of the two" in line
    assert not out.exists()
    # Resuming a run in its own folder with the same command (init_from kept) is allowed.
    cfg = load_config(DEMO, [f"init_from={pretrained}", "ckpt_path=last", f"output_dir={out}"])
    assert cfg.init_from == str(pretrained)


def test_resuming_a_finished_run_into_another_output_dir(capsys, tmp_path):
    # Lightning restores best_model_path but not best_model_score into another folder: the
    # report after training must not read the missing score (it used to raise a TypeError).
    first, second = tmp_path / "first", tmp_path / "second"
    quiet = ["samples.num_samples=0", "evaluate_test=false"]
    genodiff.train(DEMO, [*TINY, *quiet], output_dir=first)
    last = first / "checkpoints" / "last.ckpt"
    capsys.readouterr()
    # One more step without validation (a resume to the same max_steps is refused, nothing
    # being left to train): no new score, so the report must do without one.
    more = ["trainer.max_steps=5", "trainer.limit_val_batches=0"]
    kept = [
        o for o in TINY if o.split("=")[0] not in ("trainer.max_steps", "trainer.limit_val_batches")
    ]
    args = ["train", DEMO, *kept, *more, f"ckpt_path={last}", f"output_dir={second}"]
    assert cli.main(args) == 0
    assert "error" not in capsys.readouterr().err
    assert (second / "samples.fa").is_file()


def test_hg38_with_demo_data_validates_by_steps_across_epochs(tmp_path):
    # data=demo has fewer batches per epoch than trainer/gpu.yaml's val_check_interval (2000).
    cfg = load_config(ROOT / "configs" / "hg38.yaml", ["data=demo"])
    assert cfg.trainer.val_check_interval == 2000
    assert cfg.trainer.check_val_every_n_epoch is None
    cheap = [
        "data=demo",
        "model=caduceus_tiny",
        "trainer.accelerator=cpu",
        "trainer.max_steps=2",
        "trainer.accumulate_grad_batches=1",
        "trainer.num_sanity_val_steps=0",
        "trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false",
        "data.max_length=128",
        "data.batch_size=4",
        "samples.num_samples=0",
        "evaluate_test=false",
    ]
    out = tmp_path / "out"
    config = str(ROOT / "configs" / "hg38.yaml")
    genodiff.train(config, cheap, output_dir=out)
    assert (out / "checkpoints" / "last.ckpt").is_file()
    build_trainer(load_config(config, [*cheap, f"output_dir={tmp_path / 'built'}"]))


def test_a_read_only_fasta_folder_with_an_unusable_cache_says_data_cache_dir(
    capsys, tmp_path, monkeypatch
):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    fasta = read_only / "x.fa"
    fasta.write_text(">chr1\n" + "ACGT" * 2000 + "\n")
    read_only.chmod(0o555)
    writable = genome._dir_is_writable
    # root may write anywhere: make the folder read-only as far as genodiff can tell.
    monkeypatch.setattr(genome, "_dir_is_writable", lambda d: d != read_only and writable(d))
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    monkeypatch.delenv(genome.CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the default cache cannot be made
    try:
        code, err = train(capsys, tmp_path / "out", f"data.fasta={fasta}")
        assert code == 2
        line = error_line(err)
        assert str(fasta) in line and "data.cache_dir" in line and "writable folder" in line
        assert not (tmp_path / "out").exists()  # refused before anything was written
        cache = tmp_path / "cache"
        indexed = genome.Genome(fasta, cache_dir=cache)
        assert indexed.lengths == {"chr1": 8000} and list(cache.glob("*-x.fa.fai"))
    finally:
        read_only.chmod(0o755)


def test_a_one_class_benchmark_needs_two_classes(capsys, tmp_path):
    for split in ("train", "test"):
        folder = tmp_path / "one" / split / "only"
        folder.mkdir(parents=True)
        for i in range(6):
            (folder / f"{i}.txt").write_text("ACGTACGT")
    with pytest.raises(ValueError, match="needs at least two classes"):
        load_task(tmp_path, "one", download=False)
    config = str(ROOT / "configs" / "genomic_benchmarks_demo.yaml")
    overrides = [f"benchmark.root={tmp_path}", "benchmark.tasks=[one]", "folds=2"]
    code = cli.main(["finetune", config, *overrides, f"output_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "task 'one' has 1 class (only)" in err and "at least two classes" in err


# The mechanism itself -------------------------------------------------------------------------


def test_range_specs():
    unit = Range.parse("[0, 1); a fraction")
    assert 0 in unit and 0.5 in unit and 1 not in unit and -0.1 not in unit
    assert unit.describe() == "in [0, 1)" and unit.note == "a fraction"
    assert Range.parse(">=1").describe() == "at least 1" and 0 not in Range.parse(">=1")
    assert Range.parse(">0").describe() == "greater than 0" and 0 not in Range.parse(">0")
    assert 5 in Range.parse("<=5") and 5 not in Range.parse("<5")
    with pytest.raises(ValueError, match="bad range spec"):
        Range.parse("between 0 and 1")


def test_annotations():
    assert fits(3, float) and not fits(True, int) and not fits("3", int) and fits(None, int | None)
    assert fits([0.9, 0.95], tuple[float, float]) and not fits([0.9], tuple[float, float])
    assert fits("32-true", Literal["32-true", "bf16-mixed"]) and not fits(1, Literal[True])
    assert fits({"a": 1}, dict) and not fits([1], dict) and fits(object(), nn.Module)
    assert describe(int | None) == "an integer or null"
    assert describe(tuple[float, float]) == "a list of 2 numbers"


def declaring_classes():
    yield from (RunConfig, *SECTION_DATACLASSES.values(), Mamba, HyenaOperator)
    for kind in ("backbone", "objective", "data"):
        yield from registry.available(kind).values()


@pytest.mark.parametrize("cls", list(declaring_classes()), ids=lambda c: c.__name__)
def test_declared_ranges_name_arguments_and_hold_their_defaults(cls):
    spec = dataclass_spec(cls) if dataclasses.is_dataclass(cls) else class_spec(cls)
    assert set(vars(cls).get("config_ranges", {})) <= set(spec.keys)  # no misspelt key

    def check(keys: dict[str, Key]) -> None:
        for name, key in keys.items():
            if key.range is not None and isinstance(key.default, int | float):
                assert key.default in key.range, f"{cls.__name__}.{name}: default out of range"
            if key.nested is not None:
                check(key.nested.keys)

    check(spec.keys)


def test_trainer_ranges_name_trainer_arguments():
    parameters = inspect.signature(lightning.Trainer.__init__).parameters
    assert set(TRAINER_RANGES) <= set(parameters) - set(TRAINER_RESERVED)
    assert all(dataclasses.is_dataclass(c) for c in SECTION_DATACLASSES.values())


def test_a_folder_beside_the_experiment_is_no_config_group_unless_named_as_one(tmp_path):
    """Hydra would take any folder beside the experiment file for a config group, so that
    ``init_from=NAME`` with a user's ``init_from/`` folder there failed as "Could not find
    'init_from/NAME'"; only the groups genodiff composes (``model/``, ...) are read there, and a
    group option of the user's own there is still found. A file that is not YAML is named with
    its line, in one error."""
    experiment = tmp_path / "my_run.yaml"
    experiment.write_text((ROOT / "configs" / "demo_quick.yaml").read_text())
    (tmp_path / "init_from").mkdir()
    (tmp_path / "init_from" / "notes.txt").write_text("the user's own folder\n")
    (tmp_path / "model").mkdir()
    tiny = (ROOT / "configs" / "model" / "caduceus_tiny.yaml").read_text()
    (tmp_path / "model" / "my_model.yaml").write_text(tiny.replace("d_model: 64", "d_model: 24"))
    cfg = load_config(experiment, ["init_from=mdlm-chrx", "model=my_model"])
    assert cfg.init_from == "mdlm-chrx" and cfg.model.d_model == 24

    (tmp_path / "model" / "broken.yaml").write_text("d_model: [1\n")
    with pytest.raises(ConfigError) as raised:
        load_config(experiment, ["model=broken"])
    message = str(raised.value)
    assert (
        "not valid YAML" in message and f'"{tmp_path / "model" / "broken.yaml"}", line 1' in message
    )
    assert "\n" not in message


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("hg38_sed", "hg38_sedd"),
        ("configs/hg38_ar_mamb.yaml", "configs/hg38_ar_mamba.yaml"),
        ("dmeo.yaml", "demo.yaml"),
        ("elsewhere/hg38_plaidd.yaml", "hg38_plaid"),  # a shipped name is found as a name
    ],
)
def test_a_mistyped_config_name_says_the_name_meant(typed, meant, tmp_path, monkeypatch, capsys):
    # Was: "not found (looked at ...)" and every shipped name, none of them singled out.
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", typed]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"genodiff train: error: config file '{typed}' not found: ")
    assert f"did you mean {meant}? (looked at " in line


@pytest.mark.parametrize("kind", ["folder", "fifo", "missing"])
def test_a_config_path_that_is_no_file_is_named_for_what_it_is(kind, tmp_path, capsys):
    # A folder or a FIFO was "not found"; an absolute path was listed twice among the places
    # looked at (path.yaml, then configs/path.yaml, the same absolute path).
    path = tmp_path / "experiment"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    assert cli.main(["train", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    expected = {
        "folder": f"config file {path} is a folder; name a file",
        "fifo": f"config file {path} is not a regular file (a FIFO, socket or device)",
        "missing": f"config file '{path}' not found (looked at {path}, {path}.yaml); pass a path",
    }[kind]
    assert expected in line
