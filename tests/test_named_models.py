"""Models by name (genodiff.named_models): found in GENODIFF_MODELS_PATH and the install's
models/, loaded by every entry point that takes a checkpoint, listed by ``genodiff models``.

The stand-in is a tiny model exported by ``save_pretrained`` into a folder the test names; its
name must then reach the same weights as its folder does."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.config import resolve_checkpoint_reference
from genodiff.named_models import MODELS_ENV, front_matter, named_models
from tests.test_sampling_at_scale import LENGTH, model

CARD = """---
summary: tiny MDLM stand-in for the tests
license: CC0-1.0
tags:
  - dna
---
# tiny-mdlm

Trained on nothing; the tests' stand-in.
"""


@pytest.fixture
def zoo(tmp_path, monkeypatch):
    """GENODIFF_MODELS_PATH = zoo/ holding tiny-mdlm (with a card), bare (without one) and a
    folder that is no model; the working directory elsewhere."""
    zoo = tmp_path / "zoo"
    net = model()
    net.save_pretrained(zoo / "tiny-mdlm", weights="raw")
    (zoo / "tiny-mdlm" / "README.md").write_text(CARD)
    model("d3pm").save_pretrained(zoo / "bare", weights="raw")
    (zoo / "notes").mkdir()
    (zoo / "notes" / "README.md").write_text("not a model")
    monkeypatch.setenv(MODELS_ENV, str(zoo))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return net


def columns(line: str) -> tuple[int, int]:
    """Where the summary and the licence start in a ``genodiff models`` line."""
    name = line.split()[0]
    return len(line) - len(line[len(name) :].lstrip()), line.index("  licence: ") + 2


def test_models_lists_one_line_per_model_name_first_in_aligned_columns(zoo, capsys):
    assert cli.main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:2]] == ["bare", "tiny-mdlm"]  # the zoo's first
    (summary_at, licence_at), *others = {columns(line) for line in lines}
    assert others == []  # every line's summary and licence start in one column (were not)
    fields = [
        (line[:summary_at].rstrip(), line[summary_at:licence_at].rstrip(), line[licence_at:])
        for line in lines[:2]
    ]
    assert fields == [
        ("bare", "(no model card)", "licence: not stated"),
        ("tiny-mdlm", "tiny MDLM stand-in for the tests", "licence: CC0-1.0"),
    ]
    # The columns are as wide as their longest entry and two spaces.
    longest_summary = max(len(line[summary_at:licence_at].rstrip()) for line in lines)
    assert summary_at == max(len(line.split()[0]) for line in lines) + 2
    assert licence_at == summary_at + longest_summary + 2
    assert cli.main(["models", "tiny-mdlm"]) == 0
    assert capsys.readouterr().out == CARD + "\n"


def test_an_unknown_name_is_one_line_naming_the_models_there_are(zoo, capsys):
    assert cli.main(["models", "huge"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("genodiff models: error: ") and "\n" not in err
    assert "'huge'" in err and "bare" in err and "tiny-mdlm" in err


def test_a_mistyped_name_is_not_found_and_the_error_names_the_model_it_meant(zoo):
    for typed in ("Tiny-MDLM", "tiny_mdlm", "tiny-mdl"):
        with pytest.raises(FileNotFoundError) as missing:
            genodiff.load(typed)
        message = str(missing.value)
        assert "\n" not in message and message.endswith("did you mean tiny-mdlm?")
    with pytest.raises(FileNotFoundError) as missing:
        genodiff.load("huge")  # nothing close: no guess
    assert "did you mean" not in str(missing.value)


def test_load_by_name_is_the_exported_model(zoo):
    loaded = genodiff.load("tiny-mdlm")
    expected = zoo.network.eval_backbone.state_dict()
    got = loaded.network.eval_backbone.state_dict()
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    assert loaded.generate(3, LENGTH, steps=4, seed=1) == zoo.generate(3, LENGTH, steps=4, seed=1)


def test_sample_eval_and_info_take_a_name(zoo, capsys):
    out = "named.fa"
    argv = ["sample", "--checkpoint", "tiny-mdlm", "--num-samples", "3", "--length", str(LENGTH)]
    assert cli.main([*argv, "--steps", "4", "--seed", "1", "--out", out, "--no-progress"]) == 0
    with open(out) as fasta:
        records = fasta.read().split(">")[1:]
    drawn = ["".join(r.splitlines()[1:]) for r in records]
    assert drawn == list(zoo.generate(3, LENGTH, steps=4, seed=1))
    argv = ["eval", "--checkpoint", "tiny-mdlm", "--file", out, "--length", str(LENGTH)]
    assert cli.main([*argv, "--json", "--no-progress", "--seed", "2"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["windows"] == 3
    assert cli.main(["info", "tiny-mdlm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == "mdlm"


def test_a_local_folder_of_the_same_spelling_wins_and_config_references_keep_names(zoo, tmp_path):
    assert resolve_checkpoint_reference("tiny-mdlm", tmp_path) == "tiny-mdlm"
    assert resolve_checkpoint_reference("nothing", tmp_path) == str(tmp_path / "nothing")
    model("d3pm").save_pretrained("tiny-mdlm", weights="raw")  # in the working directory
    with pytest.warns(UserWarning, match="wins over the model named tiny-mdlm"):
        assert genodiff.load("tiny-mdlm").network.config["objective"]["name"] == "d3pm"
    assert resolve_checkpoint_reference("tiny-mdlm", tmp_path) == os.path.abspath("tiny-mdlm")


def test_the_first_folder_of_the_path_wins_and_a_missing_one_is_passed_over(zoo, tmp_path):
    other = tmp_path / "other"
    model("d3pm").save_pretrained(other / "tiny-mdlm", weights="raw")
    path = os.pathsep.join([str(tmp_path / "missing"), str(other), os.environ[MODELS_ENV]])
    os.environ[MODELS_ENV] = path  # restored by the zoo fixture's monkeypatch
    models = named_models()
    assert models["tiny-mdlm"].folder == (other / "tiny-mdlm").resolve()
    assert models["bare"].folder == (tmp_path / "zoo" / "bare").resolve()


@pytest.mark.parametrize(
    ("card", "fields"),
    [
        (CARD, {"summary": "tiny MDLM stand-in for the tests", "license": "CC0-1.0", "tags": ""}),
        ("---\nsummary: 'quoted'\n", {}),  # no closing line: no front matter
        ("# a title\n---\nsummary: x\n---\n", {}),  # not at the top
        ("---\n---\n", {}),
    ],
)
def test_front_matter_is_flat_keys_between_the_opening_and_closing_lines(card, fields):
    assert front_matter(card) == fields


def test_a_local_folder_that_shadows_a_name_is_said(zoo, tmp_path):
    """A folder of the working directory spelled as a named model is read instead: its
    errors would not say why the model was not loaded, so a warning names both."""
    os.mkdir("tiny-mdlm")  # the user's own folder, no model
    shadowed = r"tiny-mdlm is the local folder .*wins over the model named tiny-mdlm"
    with (
        pytest.warns(UserWarning, match=shadowed),
        pytest.raises(FileNotFoundError, match="holds no genodiff.json"),
    ):
        genodiff.load("tiny-mdlm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the local one by its path: nothing to say
        with pytest.raises(FileNotFoundError, match="holds no genodiff.json"):
            genodiff.load("./tiny-mdlm")
    os.chdir(tmp_path / "zoo")  # the named model's own folder: no other to warn of
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert genodiff.load("tiny-mdlm").network.config["objective"]["name"] == "mdlm"
