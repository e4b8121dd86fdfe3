"""``GenerationConfig`` (issue 36, items 1 and 2): one declaration of the sampling options, from
which generate's checks, genodiff sample's flags and docs/python_api.md's table follow; a
model's defaults from its run's ``samples:`` section; the conventions of transformers'
users (``load(device, dtype)``, ``Model.to``, ``generator=``, an immutable ``Samples``).

The models are small networks with random weights: what is checked is which options a draw
runs with (the network calls it makes), not what it draws."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
import torch

import genodiff
from genodiff import cli, registry
from genodiff.errors import InputValueError
from genodiff.generation_config import GenerationConfig, option_names
from genodiff.model import GenerativeModel
from genodiff.parallel import Workers
from genodiff.pipeline import Model, Samples
from tests.test_cli import ROOT

LENGTH = 16


def tiny(samples: dict | None = None, backbone: str = "caduceus", objective: str = "mdlm") -> Model:
    """A model of ``objective`` (MDLM) on a one-layer ``backbone`` (Caduceus), random weights;
    ``samples``: its run's section."""
    torch.manual_seed(0)
    config = {
        "model": {"name": backbone, "d_model": 16, "n_layer": 1},
        "objective": {"name": objective},
        "data": {"name": "fasta", "max_length": LENGTH},
        "ema": {"decay": 0},
    }
    if samples is not None:
        config["samples"] = samples
    return Model(GenerativeModel(config), "in memory")


def network_calls(model: Model, *args, **options) -> int:
    """How many times ``model.generate(*args, **options)`` calls the network."""
    calls = []
    hook = model.network.eval_backbone.register_forward_hook(lambda *_: calls.append(1))
    try:
        model.generate(*args, **options)
    finally:
        hook.remove()
    return len(calls)


# ------------------------------------------------------------------ where a value comes from


def test_the_run_samples_section_sets_the_steps_and_a_call_overrides_them():
    model = tiny({"steps": 5, "seed": 3, "batch_size": 4})
    config = model.generation_config
    assert (config.steps, config.seed, config.batch_size) == (5, 3, 4)
    # ancestral: one network call per step (batch_size 4 >= 1 sample: one batch)
    assert network_calls(model, 1, sampler="ancestral") == 5
    assert network_calls(model, 1, sampler="ancestral", steps=3) == 3
    # a generation config passed to the call replaces the model's; the call's options win
    passed = GenerationConfig(steps=2, sampler="ancestral")
    assert network_calls(model, 1, generation_config=passed) == 2
    assert network_calls(model, 1, generation_config=passed, steps=4) == 4
    # and the model's seed is the one the samples record
    assert model.generate(1, steps=2).run.seed == 3


def test_a_model_without_a_samples_section_takes_the_defaults():
    model = tiny()
    assert model.generation_config == GenerationConfig()
    assert GenerationConfig().steps == 1024  # the documented default, built independently


def test_a_saved_steps_value_is_unused_by_a_sampler_that_takes_none():
    model = tiny({"steps": 5})
    drawn = model.generate(1, sampler="first-hitting")  # not refused: the call set no steps
    assert drawn.run.steps is None and len(drawn[0]) == LENGTH
    with pytest.raises(InputValueError, match="takes no number of steps") as refused:
        model.generate(1, sampler="first-hitting", steps=5)
    assert refused.value.parameter == "steps"


def test_save_pretrained_writes_the_generation_config_and_load_reads_it(tmp_path):
    model = tiny({"steps": 7, "sampler": "ancestral"})
    folder = model.save_pretrained(tmp_path / "exported", weights="raw")
    again = genodiff.load(folder)
    assert again.generation_config == GenerationConfig(steps=7, sampler="ancestral")
    assert network_calls(again, 1) == 7


def test_save_pretrained_keeps_an_assigned_generation_config(tmp_path):
    model = tiny({"steps": 5})
    model.generation_config = GenerationConfig(steps=7, sampler="ancestral", seed=3, batch_size=2)
    again = genodiff.load(model.save_pretrained(tmp_path / "exported", weights="raw"))
    assert again.generation_config == GenerationConfig(
        steps=7, sampler="ancestral", seed=3, batch_size=2
    )
    assert network_calls(again, 1) == 7 and again.generate(1, steps=2).run.seed == 3


def test_save_pretrained_refuses_a_generation_config_it_cannot_keep(tmp_path):
    model = tiny()
    model.generation_config = GenerationConfig(top_p=0.9, steps=7)
    with pytest.raises(InputValueError, match=r"sets top_p=0\.9, which a saved model") as refused:
        model.save_pretrained(tmp_path / "exported", weights="raw")
    assert refused.value.parameter == "generation_config" and "\n" not in str(refused.value)
    assert not (tmp_path / "exported").exists()


# SEDD's both: samplers of another objective (a name no objective has is refused when the
# generation config is built: test_a_mistyped_sampler_is_refused_when_the_config_is_built)
@pytest.mark.parametrize("sampler", ["analytic", "euler"])
def test_save_pretrained_refuses_a_sampler_the_model_has_not(tmp_path, sampler):
    """Saved, it would be every later generate's default, each refused: not written."""
    model = tiny()
    model.generation_config = GenerationConfig(sampler=sampler)  # assigning checks no model
    with pytest.raises(InputValueError, match=f"MDLM has no sampler '{sampler}'") as refused:
        model.save_pretrained(tmp_path / "exported", weights="raw")
    assert str(refused.value).startswith("the generation config cannot be saved with this model")
    assert refused.value.parameter == "generation_config"
    assert not (tmp_path / "exported").exists()


def test_a_saved_generation_config_out_of_range_is_refused_naming_the_model(tmp_path):
    folder = tiny({"steps": 7}).save_pretrained(tmp_path / "m", weights="raw")
    record = json.loads((folder / "genodiff.json").read_text())
    record["config"]["samples"]["steps"] = 0  # edited by hand
    (folder / "genodiff.json").write_text(json.dumps(record))
    with pytest.raises(InputValueError) as refused:
        genodiff.load(folder)
    message = str(refused.value)
    assert message.startswith(f"{folder}: the generation config its run saved (config.samples)")
    assert "steps must be in [1, 1000000], got 0" in message and "\n" not in message
    assert refused.value.parameter is None  # no option of the call is at fault


def test_a_generation_config_of_another_type_is_refused_when_assigned():
    model = tiny()
    with pytest.raises(
        InputValueError, match="must be a genodiff GenerationConfig, got dict"
    ) as no:
        model.generation_config = {"steps": 3}
    assert no.value.parameter == "generation_config"
    assert model.generation_config == GenerationConfig()  # kept


def test_genodiff_sample_draws_with_the_saved_config_unless_a_flag_says(tmp_path):
    folder = tiny({"steps": 7, "seed": 5}).save_pretrained(tmp_path / "m", weights="raw")
    base = ["sample", "--checkpoint", str(folder), "--num-samples", "1", "--length", "8"]
    assert cli.main([*base, "--out", str(tmp_path / "saved.fa"), "--no-progress"]) == 0
    header = (tmp_path / "saved.fa").read_text().splitlines()[0]
    assert " steps=7 " in header and " seed=5 " in header
    flags = ["--steps", "3", "--seed", "1", "--out", str(tmp_path / "flags.fa"), "--no-progress"]
    assert cli.main([*base, *flags]) == 0
    header = (tmp_path / "flags.fa").read_text().splitlines()[0]
    assert " steps=3 " in header and " seed=1 " in header


# ------------------------------------------------------------------ checks, one line each


def test_an_unknown_option_is_one_line_listing_the_options():
    with pytest.raises(InputValueError) as refused:
        tiny().generate(1, stepz=4)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("unknown generation option 'stepz'")
    listed = message.split("the options are: ")[1].split(", ")
    assert listed == [f.name for f in dataclasses.fields(GenerationConfig)]
    # the constructor, as transformers users build one, says the same (not Python's TypeError)
    for build in (
        lambda: GenerationConfig(stepz=4),
        lambda: GenerationConfig().updated(stepz=None),
    ):
        with pytest.raises(InputValueError) as refused:
            build()
        assert str(refused.value) == message


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("steps", 0, "steps must be in [1, 1000000], got 0"),
        ("steps", 2.5, "steps must be an integer, got 2.5"),
        ("steps", True, "steps must be an integer, got True"),
        ("length", -3, "length must be >= 1, got -3"),
        ("temperature", 0.0, "temperature must be > 0, got 0.0"),
        ("temperature", float("nan"), "temperature must be a finite number, got nan"),
        ("top_p", 1.5, "top_p must be in (0, 1], got 1.5"),
        ("guidance", 101.0, "guidance must be in [0, 100], got 101.0"),
        # was "got -1.0: above 100 the guided law is a point mass", the other bound's reason
        ("guidance", -1.0, "guidance must be in [0, 100], got -1.0: 0 is p(x), 1 the"),
        ("guidance_schedule", "linear", "guidance_schedule must be one of: constant, ramp"),
        ("classifier_form", "approx", "classifier_form must be one of: first-order, exact"),
        ("seed", -1, "seed must be >= 0, got -1"),
        ("batch_size", 0, "batch_size must be >= 1, got 0"),
        ("prefix", 7, "prefix must be a string, got 7"),
    ],
)
def test_a_value_out_of_its_range_is_refused_naming_the_option(option, value, expected):
    model = tiny()
    with pytest.raises(InputValueError) as refused:
        model.generate(1, **{option: value})
    assert str(refused.value).startswith(expected) and "\n" not in str(refused.value)
    assert refused.value.parameter == option
    with pytest.raises(InputValueError):  # and the same from the dataclass itself
        GenerationConfig(**{option: value})


# The built-in objectives' samplers, as docs/generating.md lists them.
BUILT_IN_SAMPLERS = ("analytic", "ancestral", "cached", "euler", "first-hitting", "semi-ar")


def test_a_mistyped_sampler_is_refused_when_the_config_is_built():
    """Was: accepted, and refused only by the first generate (or save_pretrained)."""
    for build in (
        lambda: GenerationConfig(sampler="anscestral"),
        lambda: GenerationConfig().updated(sampler="anscestral"),
        lambda: GenerationConfig.from_dict({"sampler": "anscestral"}),
        lambda: tiny().generate(1, sampler="anscestral"),
    ):
        with pytest.raises(InputValueError) as refused:
            build()
        message = str(refused.value)
        said = "unknown sampler 'anscestral' (did you mean 'ancestral'?); the samplers: "
        assert message.startswith(said) and "\n" not in message
        listed = message[len(said) :].split(" (")[0].split(", ")
        assert set(BUILT_IN_SAMPLERS) <= set(listed)  # and any installed plugin's
        assert refused.value.parameter == "sampler"


def test_a_sampler_another_objective_has_is_refused_when_a_model_draws():
    """A name some objective has builds a config; a model whose objective lacks it refuses it
    when it draws, naming its own samplers, as before."""
    config = GenerationConfig(sampler="first-hitting")
    with pytest.raises(InputValueError, match="has no sampler 'first-hitting'; choose one of"):
        tiny(backbone="mamba", objective="ar").generate(1, generation_config=config)
    with pytest.raises(InputValueError, match="MDLM has no sampler 'euler'; choose one of"):
        tiny().generate(1, sampler="euler")


def test_the_sample_command_says_a_mistyped_sampler_in_one_line(tmp_path, capsys):
    folder = tiny().save_pretrained(tmp_path / "m", weights="raw")
    argv = ["sample", "--checkpoint", str(folder), "--out", str(tmp_path / "s.fa")]
    assert cli.main([*argv, "--sampler", "first-hiting", "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "genodiff sample: error: unknown sampler 'first-hiting' (did you mean 'first-hitting'?)"
    )
    assert line.endswith("(--sampler)")
    assert not (tmp_path / "s.fa").exists()


def test_a_stride_not_below_the_block_is_refused_when_the_config_is_built():
    """block and stride need no model to be checked together (was: at the first draw)."""
    with pytest.raises(InputValueError) as refused:
        GenerationConfig(sampler="semi-ar", block=16, stride=16)
    assert str(refused.value) == (
        "stride must be in [1, block - 1] = [1, 15] so that consecutive windows share "
        "block - stride tokens, got stride 16"
    )
    assert refused.value.parameter == ("stride", "block")
    assert GenerationConfig(block=16, stride=15).stride == 15


def test_a_mistyped_choice_names_the_one_spelled_closest():
    with pytest.raises(InputValueError) as refused:
        GenerationConfig(guidance_schedule="rmap")
    assert str(refused.value) == (
        "guidance_schedule must be one of: constant, ramp; got 'rmap' (did you mean 'ramp'?)"
    )


def test_numpy_numbers_are_the_python_numbers_they_equal():
    # A seed or a count that comes out of NumPy (np.arange, an array's element) draws what the
    # Python number draws, and the config holds Python numbers (its JSON, the sample headers).
    model = tiny()
    plain = dict(steps=3, seed=5, temperature=0.5, batch_size=2)
    numpy = dict(steps=np.int64(3), seed=np.uint32(5), temperature=np.float32(0.5),
                 batch_size=np.int16(2))  # fmt: skip
    expected = model.generate(3, 16, **plain)
    drawn = model.generate(np.int64(3), np.int32(16), **numpy)
    assert list(drawn) == list(expected)
    config = GenerationConfig(**numpy)
    assert [type(getattr(config, name)) for name in numpy] == [int, int, float, int]
    assert config == GenerationConfig(**plain)
    json.dumps(config.to_dict())
    assert model.score(list(expected), seed=np.int64(7)) == model.score(list(expected), seed=7)
    for refused in (np.bool_(True), np.float64(2.0)):
        with pytest.raises(InputValueError, match="steps must be an integer"):
            GenerationConfig(steps=refused)


def test_the_data_module_ends_samples_knowing_the_given_positions(monkeypatch):
    # DataModule.end_samples hears which positions a prefix or template fixed: the text
    # plugin's padded sentences then never end before the user's last given token.
    from genodiff.data.datamodule import FastaDataModule

    heard = []
    original = FastaDataModule.end_samples

    def ends(self, samples, given=None):
        heard.append(None if given is None else given.tolist())
        return original(self, samples, given)

    monkeypatch.setattr(FastaDataModule, "end_samples", ends)
    model = tiny()
    model.generate(2, 8, steps=2, prefix="ACG")
    model.generate(2, 8, steps=2)
    assert heard == [[True] * 3 + [False] * 5, None]


def test_a_generation_config_is_frozen_and_updated_by_copy():
    config = GenerationConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.steps = 3
    changed = config.updated(steps=3, sampler=None)  # None: not given
    assert (changed.steps, changed.sampler, config.steps) == (3, None, 1024)


def test_a_generation_config_round_trips_through_a_dict_and_a_json_file(tmp_path):
    config = GenerationConfig(steps=7, top_p=0.9, label="human", infill="t.fa", seed=3)
    as_dict = config.to_dict()
    assert list(as_dict) == [f.name for f in dataclasses.fields(GenerationConfig)]
    assert (as_dict["steps"], as_dict["top_p"], as_dict["label"], as_dict["length"]) == (
        7, 0.9, "human", None
    )  # fmt: skip
    path = tmp_path / "generation.json"
    path.write_text(json.dumps(as_dict))
    assert GenerationConfig.from_dict(json.loads(path.read_text())) == config
    assert GenerationConfig.from_dict({"steps": 5}) == GenerationConfig(steps=5)
    with pytest.raises(InputValueError, match="unknown generation option 'stepz'; the options"):
        GenerationConfig.from_dict({"stepz": 5})
    with pytest.raises(InputValueError, match=r"steps must be in \[1, 1000000\], got 0"):
        GenerationConfig.from_dict({"steps": 0})


# ------------------------------------------------------------------ the command's flags


def sample_parser() -> argparse.ArgumentParser:
    commands = next(a for a in cli.build_parser()._actions if isinstance(a.choices, dict))
    return commands.choices["sample"]


def test_every_option_has_its_flag_and_nothing_else_sets_it():
    actions = {a.dest: a for a in sample_parser()._actions}
    for name in option_names():
        action = actions[name]
        assert f"--{name.replace('_', '-')}" in action.option_strings
        assert action.default is None  # unset: the checkpoint's generation config decides
    values = {
        "--length": ("32", 32),
        "--steps": ("9", 9),
        "--top-p": ("0.5", 0.5),
        "--nucleus": ("0.25", 0.25),
        "--seed": ("4", 4),
        "--guidance-form": ("transition", "transition"),
    }
    base = ["--checkpoint", "x", "--out", "y.fa"]
    for flag, (text, parsed) in values.items():
        args = sample_parser().parse_args([*base, flag, text])
        name = "top_p" if flag == "--nucleus" else flag[2:].replace("-", "_")
        assert getattr(args, name) == parsed


def test_the_help_gives_each_default(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sample", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: the checkpoint's samples.steps, else 1024)" in text
    assert "(default: the checkpoint's samples.seed, else 0)" in text
    assert "(default: the checkpoint's samples.batch_size, else 16)" in text
    assert "in (0, 1] (default: 1.0)" in text


# ------------------------------------------------------------------ the docs' table


def docs_table() -> dict[str, list[str]]:
    """docs/python_api.md's option table: {option: [flags cell, default cell, notes]}."""
    text = (ROOT / "docs" / "python_api.md").read_text()
    start = text.index("| option | `genodiff sample` flag | default |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_docs_table_lists_every_option_with_its_flag_and_default():
    table = docs_table()
    assert list(table) == option_names()  # every option, in order, and no other
    for field in dataclasses.fields(GenerationConfig):
        flags, default, _ = table[field.name]
        assert f"`--{field.name.replace('_', '-')}`" in flags
        assert default == f"`{field.default!r}`", field.name


def test_the_docs_table_check_fails_on_a_wrong_default(monkeypatch, tmp_path):
    """The check above reads the file: a table whose steps default drifted fails it."""
    text = (ROOT / "docs" / "python_api.md").read_text()
    drifted = re.sub(r"(\| `steps` \|[^|]*\| )`1024`", r"\1`256`", text)
    assert drifted != text
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "python_api.md").write_text(drifted)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    with pytest.raises(AssertionError, match="steps"):
        test_the_docs_table_lists_every_option_with_its_flag_and_default()


# ------------------------------------------------------------------ item 2: conventions


def test_a_generator_draws_the_seed_and_the_batch_size_changes_nothing():
    model = tiny()
    options = {"length": LENGTH, "steps": 3}
    first = model.generate(4, generator=torch.Generator().manual_seed(11), batch_size=4, **options)
    again = model.generate(4, generator=torch.Generator().manual_seed(11), batch_size=1, **options)
    assert first == again and torch.equal(first.ids, again.ids)
    # the seed it drew is recorded, and that seed draws the same sequences
    assert model.generate(4, seed=first.run.seed, **options) == first
    other = model.generate(4, generator=torch.Generator().manual_seed(12), **options)
    assert other != first
    with pytest.raises(InputValueError, match="a seed or a generator, not both"):
        model.generate(1, seed=1, generator=torch.Generator(), **options)


def test_generate_and_score_neither_read_nor_advance_the_global_random_state():
    """docs/python_api.md: without a seed a call takes the saved one, and torch's global
    random state neither changes the draws nor is changed by them."""
    model = tiny()
    torch.manual_seed(1)
    before = torch.get_rng_state()
    first = model.generate(3, length=16, steps=2)
    nelbo = model.score(list(first), t_samples=2)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(2)
    assert model.generate(3, length=16, steps=2, seed=None) == first  # the saved seed, 0
    assert model.score(list(first), t_samples=2) == nelbo


def test_samples_are_immutable_and_a_slice_keeps_save(tmp_path):
    samples = tiny().generate(4, steps=2, seed=1)
    assert isinstance(samples, Samples) and len(samples) == 4
    for change in (lambda: samples.append("ACGT"), lambda: samples.__setitem__(0, "ACGT")):
        with pytest.raises((AttributeError, TypeError)):
            change()
    samples.ids[0, 0] = 99  # a copy: the samples keep theirs
    tokenizer = samples.tokenizer
    assert [tokenizer.decode_sample(row.tolist()) for row in samples.ids] == list(samples)
    part = samples[1:3]
    assert isinstance(part, Samples) and list(part) == [samples[1], samples[2]]
    assert torch.equal(part.ids, samples.ids[1:3])
    written = part.save(tmp_path / "part.fa").read_text()
    assert written.count(">") == 2 and samples[1] in written and samples[0] not in written


def test_load_takes_a_device_and_a_dtype_and_to_returns_the_model(tmp_path):
    folder = tiny({"steps": 2}).save_pretrained(tmp_path / "m", weights="raw")
    model = genodiff.load(folder)  # the CPU unless asked, as transformers
    assert model.device == torch.device("cpu")
    assert {p.dtype for p in model.network.parameters()} == {torch.float32}
    half = genodiff.load(folder, device="cpu", dtype=torch.bfloat16)
    assert {p.dtype for p in half.network.parameters()} == {torch.bfloat16}
    assert len(half.generate(1, length=8)[0]) == 8
    assert model.to("cpu", torch.bfloat16) is model
    assert {p.dtype for p in model.network.parameters()} == {torch.bfloat16}
    assert model.to(torch.float32) is model  # a dtype alone comes first, as torch's Module.to
    assert {p.dtype for p in model.network.parameters()} == {torch.float32}
    assert model.device == torch.device("cpu")
    with pytest.raises(InputValueError, match="floating-point") as refused:
        model.to(dtype=torch.int64)
    assert refused.value.parameter == "dtype"


def test_a_model_saved_in_bfloat16_loads_in_float32_unless_asked(tmp_path):
    model = tiny().to(torch.bfloat16)
    folder = model.save_pretrained(tmp_path / "m", weights="raw")
    assert {p.dtype for p in genodiff.load(folder).network.parameters()} == {torch.float32}
    kept = genodiff.load(folder, dtype=torch.bfloat16)
    assert {p.dtype for p in kept.network.parameters()} == {torch.bfloat16}
    sequences = ["ACGTACGTACGTACGT", "TTGACCAGTAGGCATA"]
    assert kept.score(sequences, t_samples=2) == model.score(sequences, t_samples=2)


@pytest.mark.parametrize(
    ("dtype", "name"), [(torch.bfloat16, "bfloat16"), (torch.float16, "float16")]
)
def test_samples_drawn_in_another_dtype_say_so_in_their_provenance(tmp_path, dtype, name):
    """The provenance named the weights by the CRC-32 of their float32 values alone: samples
    drawn with them cast (load(dtype=...), Model.to, --dtype), whose rounding can draw other
    sequences, had the very headers of float32 samples."""
    folder = tiny().save_pretrained(tmp_path / "m", weights="raw")
    options = {"length": 16, "steps": 2, "seed": 1}
    plain = genodiff.load(folder).generate(2, **options)
    crc = plain.run.weights_crc32
    assert f"weights_crc32={crc} sampler=" in plain.run.describe()  # float32: as before
    for model in (genodiff.load(folder, dtype=dtype), genodiff.load(folder).to(dtype)):
        cast = model.generate(2, **options)
        assert f"weights_crc32={crc} dtype={name} sampler=" in cast.run.describe()
        fasta = cast.save(tmp_path / f"{name}.fa", overwrite=True).read_text()
        assert fasta.count(f" dtype={name} ") == 2
        records = cast.save(tmp_path / f"{name}.jsonl", overwrite=True).read_text().splitlines()
        assert [json.loads(line)["dtype"] for line in records] == [name, name]


class _OneProcess:
    """A one-process run's stand-in for Lightning's Fabric, on ``device``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def barrier(self) -> None:
        pass


def test_generate_to_file_leaves_the_model_where_it_was(tmp_path, monkeypatch):
    model = tiny()
    moves: list[torch.device] = []
    original = Model.to

    def to(self, device=None, dtype=None):
        moves.append(torch.device(device))
        return original(self, device, dtype)

    monkeypatch.setattr(Model, "to", to)
    elsewhere = torch.device("cpu", 0)  # another device than the model's (cpu), on any machine
    workers = Workers(fabric=_OneProcess(elsewhere))
    monkeypatch.setattr("genodiff.pipeline.launch_workers", lambda settings: workers)
    written = model.generate_to_file(tmp_path / "s.fa", 2, LENGTH, steps=2, devices=1)
    assert Path(written.path).read_text().count(">") == 2
    assert moves == [elsewhere, torch.device("cpu")]  # drawn there, then back
    assert model.device == torch.device("cpu")


def test_an_absurd_number_of_steps_is_refused_before_anything_is_drawn():
    from genodiff.generation_config import MAX_STEPS, GenerationConfig

    assert GenerationConfig(steps=MAX_STEPS).steps == MAX_STEPS
    with pytest.raises(InputValueError, match=r"steps must be in \[1, 1000000\], got 10{15}"):
        GenerationConfig(steps=10**15)


class PluginObjective:
    """An objective plugin's class as the registry reads it: its samplers."""

    samplers = {"plugin-sampler": None}


def test_a_broken_plugin_stands_in_the_way_of_no_other_plugins_sampler(monkeypatch):
    # Was: the sampler of a plugin that loads was refused at construction (so a model of
    # that plugin no longer loaded), for another plugin failed to import.
    registry.available("objective", plugins=False)  # the built-ins registered
    monkeypatch.setitem(registry._REGISTRIES, "objective", dict(registry._REGISTRIES["objective"]))
    group = registry.ENTRY_POINT_GROUPS["objective"]
    plugins = [
        EntryPoint("working", f"{__name__}:PluginObjective", group),
        EntryPoint("broken", "genodiff_no_such_plugin:Objective", group),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: plugins)
    assert GenerationConfig(sampler="plugin-sampler").sampler == "plugin-sampler"
    assert GenerationConfig.from_dict({"sampler": "plugin-sampler"}).sampler == "plugin-sampler"
