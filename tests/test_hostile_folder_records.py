"""The JSON records of a saved folder (config.json, genodiff.json, tokenizer.json) and the
tokenizer record of a .ckpt, hostile or damaged: each is one line on stderr naming the file,
read in bounded memory (at most ``MAX_JSON_BYTES`` of it), never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.plain_records import MAX_JSON_BYTES
from genodiff.tokenizers import CHECKPOINT_KEY
from tests.test_bad_input_cli import one_line_error
from tests.test_hub import training_checkpoint

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ("config.json", "genodiff.json", "tokenizer.json")


@pytest.fixture
def folder(tmp_path) -> Path:
    """A copy of a shipped model's folder, to damage."""
    return Path(shutil.copytree(ROOT / "models" / "mdlm-chrx", tmp_path / "m"))


def refused_in_one_line(capsys, folder: Path, words: str) -> str:
    with pytest.raises(ValueError, match=re.escape(words)):
        genodiff.load(folder)
    assert cli.main(["info", str(folder)]) == 2
    err = one_line_error(capsys, "info")
    assert words in err
    return err


@pytest.mark.parametrize("record", RECORDS)
def test_a_record_larger_than_any_genodiff_writes_is_refused_unread(folder, capsys, record):
    path = folder / record
    path.unlink()
    with open(path, "wb") as handle:  # sparse: 1 GiB of zeros on no disk space
        handle.truncate(1 << 30)
    assert os.path.getsize(path) > MAX_JSON_BYTES
    refused_in_one_line(capsys, folder, f"{record} is larger than 64.0 MiB")  # not MemoryError


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("garbage", "tokenizer.json is not valid JSON"),
        ("[1, 2]", "tokenizer.json holds a JSON list"),
        ("[" * 50_000 + "]" * 50_000, "nested more than 32 containers deep"),
        ('{"name": 3}', "tokenizer.json is not a tokenizer record"),
        ('{"name": "dna", "state": {"x": 1}}', "dna tokenizer cannot be rebuilt"),
        ('{"name": "dna", "state": [1]}', "dna tokenizer cannot be rebuilt"),
    ],
)
def test_a_damaged_tokenizer_json_is_one_line(folder, capsys, content, words):
    (folder / "tokenizer.json").write_text(content)  # were tracebacks: JSON, Type, Recursion
    refused_in_one_line(capsys, folder, words)


def test_a_tokenizer_json_that_is_a_fifo_is_refused_not_passed_over(folder, capsys):
    (folder / "tokenizer.json").unlink()
    os.mkfifo(folder / "tokenizer.json")  # was read as no tokenizer at all
    refused_in_one_line(capsys, folder, "tokenizer.json is not a regular file")


def test_a_checkpoints_tokenizer_state_it_cannot_rebuild_is_one_line(tmp_path, capsys):
    ckpt = tmp_path / "last.ckpt"
    training_checkpoint(ckpt, seed=0)
    content = torch.load(ckpt, weights_only=True)
    content[CHECKPOINT_KEY] = {"name": "dna", "state": {"x": 1}}
    torch.save(content, ckpt)
    words = f"({CHECKPOINT_KEY}): the dna tokenizer cannot be rebuilt"
    refused_in_one_line(capsys, ckpt, words)


def test_keys_this_version_does_not_know_are_named_in_a_warning(folder):
    """A model saved by another version with a generation option (``samples:``) or a
    conditioning key this one lacks would generate otherwise: they are ignored, but not
    silently. Training-only sections (optim, ema, trainer) are not read on loading."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the folder as genodiff wrote it: every key known
        genodiff.load(folder)
    path = folder / "genodiff.json"
    record = json.loads(path.read_text())
    record["config"]["samples"]["guidance_knob"] = 0.5
    record["config"]["conditioning"]["label_smoothing"] = 0.1
    record["config"]["watermark"] = {"key": 7}
    record["config"]["optim"]["schedule_free"] = True  # training only: not named
    path.write_text(json.dumps(record))
    with pytest.warns(UserWarning) as caught:
        genodiff.load(folder)
    (message,) = [str(w.message) for w in caught if "does not know" in str(w.message)]
    named = message.split(" sets ")[1].split(", which")[0]
    assert sorted(named.split(", ")) == [
        "conditioning.label_smoothing",
        "samples.guidance_knob",
        "watermark",
    ]
