"""One loader for every kind of checkpoint (``genodiff.checkpoints.load.open_checkpoint``): a
generator, a guidance classifier and a fine-tuned classifier are told apart by what they hold;
each kind's builder (``load_model``, ``load_classifier``, ``load_finetuned_classifier``) takes
a file, a run's folder or a Hub id, refuses the other kinds in one line saying what the file is
and where it goes, checks the weights fit and are finite, and reads with the stored tokenizer."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from genodiff import registry
from genodiff.checkpoints import CheckpointError, load_model, open_checkpoint
from genodiff.checkpoints.io import CLASSIFIER_RECORD_KEY, read_checkpoint_file
from genodiff.checkpoints.load import UnknownCheckpointError
from genodiff.classifiers import load_classifier
from genodiff.classifiers.checkpoint import classifier_record
from genodiff.classifiers.model import build_classifier
from genodiff.config import completed_model_config
from genodiff.errors import InputValueError
from genodiff.finetuning.classifier import SequenceClassifier, build_backbone
from genodiff.finetuning.trained import RECORD_KEY, load_finetuned_classifier
from genodiff.finetuning.trained import classifier_record as finetuned_record
from genodiff.plain_records import plain_tree
from genodiff.tokenizers import CHECKPOINT_KEY, DNATokenizer, tokenizer_record
from tests import test_hub
from tests.test_hub import training_checkpoint, write_hub_cache

offline_cache = test_hub.offline_cache  # a Hub cache of the test's own, HF_HUB_OFFLINE=1
TOK = DNATokenizer()
CADUCEUS = {"name": "caduceus", "d_model": 16, "n_layer": 1}
# What each kind is, and where it goes, as the refusals say it.
IS = {
    "generator": "a generative model (genodiff train)",
    "classifier": "a guidance classifier (genodiff classifier)",
    "finetuned": "a fine-tuned classifier (genodiff finetune)",
}
GOES = {
    "generator": "sampling and scoring take it as their checkpoint",
    "classifier": "guided sampling takes it as its classifier",
    "finetuned": "evaluate_samples takes it as its oracle",
}
# The argument each kind goes to: the parameter of the refusal (the CLI names its option).
TAKEN_BY = {"generator": "checkpoint", "classifier": "classifier", "finetuned": "oracle"}
LOADERS = {
    "generator": load_model,
    "classifier": load_classifier,
    "finetuned": load_finetuned_classifier,
}


def save(path: Path, module: torch.nn.Module, **content) -> Path:
    """A checkpoint file: ``module``'s weights under ``classifier.``, and ``content``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {f"classifier.{k}": t for k, t in module.state_dict().items()}
    torch.save({"state_dict": state, **content}, path)
    return path


def guidance_checkpoint(path: Path) -> torch.nn.Module:
    """A noisy guidance classifier's checkpoint as ``genodiff classifier`` writes it."""
    torch.manual_seed(1)
    model = completed_model_config(CADUCEUS, TOK)
    classifier = build_classifier(model, 2, "noisy", TOK, "mean")
    record = classifier_record("noisy", ["a", "b"], model, "mean", None, {"name": "mdlm"})
    save(
        path,
        classifier,
        hyper_parameters={"config": {"kind": "noisy"}},
        **{CLASSIFIER_RECORD_KEY: record, CHECKPOINT_KEY: tokenizer_record(TOK)},
    )
    return classifier


def finetuned_checkpoint(path: Path, tokenizer_name: str | None = "dna") -> SequenceClassifier:
    """A fine-tuned classifier's checkpoint as ``genodiff finetune`` writes it, storing the
    tokenizer ``tokenizer_name`` names (None: none, as checkpoints written before)."""
    torch.manual_seed(2)
    classifier = SequenceClassifier(build_backbone(CADUCEUS, TOK), 2, TOK, "mean")
    content = {"hyper_parameters": {RECORD_KEY: finetuned_record(classifier, ["a", "b"], 8, "t")}}
    if tokenizer_name is not None:
        content[CHECKPOINT_KEY] = {"name": tokenizer_name, "state": {}}
    save(path, classifier, **content)
    return classifier


@pytest.fixture
def checkpoints(tmp_path) -> dict[str, Path]:
    """A checkpoint of each kind, each in a run's folder: ``<kind>/checkpoints/last.ckpt``."""
    files = {kind: tmp_path / kind / "checkpoints" / "last.ckpt" for kind in IS}
    training_checkpoint(files["generator"], seed=0)
    guidance_checkpoint(files["classifier"])
    finetuned_checkpoint(files["finetuned"])
    return files


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_the_kind_is_told_from_what_the_file_holds(checkpoints):
    for kind, path in checkpoints.items():
        for reference in (path, path.parents[1]):  # the file, its run's folder
            stored = open_checkpoint(reference)
            assert (stored.kind, stored.source) == (kind, path)
            assert tokenizer_record(stored.tokenizer) == tokenizer_record(TOK)
    assert open_checkpoint(checkpoints["classifier"]).record["class_names"] == ["a", "b"]
    assert open_checkpoint(checkpoints["finetuned"]).record["task"] == "t"


@pytest.mark.parametrize("expected", sorted(IS))
@pytest.mark.parametrize("kind", sorted(IS))
def test_each_loader_refuses_the_other_kinds_saying_what_they_are(checkpoints, kind, expected):
    path = checkpoints[kind]
    if kind == expected:
        LOADERS[expected](path)  # its own kind loads
        return
    with pytest.raises(InputValueError) as err:
        LOADERS[expected](path)
    assert str(err.value) == f"{path} is {IS[kind]}, not {IS[expected]}; {GOES[kind]}"
    assert err.value.parameter == TAKEN_BY[kind]


def test_the_classifiers_load_from_hub_ids(tmp_path, offline_cache):
    guide = guidance_checkpoint(tmp_path / "guide" / "last.ckpt")
    oracle = finetuned_checkpoint(tmp_path / "oracle" / "best.ckpt")
    write_hub_cache(offline_cache, "test-org/guide", {"main": tmp_path / "guide"})
    write_hub_cache(offline_cache, "test-org/oracle", {"main": tmp_path / "oracle"})
    assert same_weights(load_classifier("test-org/guide").classifier, guide)
    assert same_weights(load_finetuned_classifier("test-org/oracle").classifier, oracle)


def nan_in_first_weight(path: Path) -> str:
    """Writes a NaN into the first floating-point weight of the checkpoint; its name."""
    content = torch.load(path, weights_only=True)
    name = next(k for k, t in content["state_dict"].items() if t.is_floating_point())
    content["state_dict"][name].view(-1)[0] = float("nan")
    torch.save(content, path)
    return name


@pytest.mark.parametrize("kind", ["classifier", "finetuned"])
def test_the_classifiers_check_their_weights_fit_and_are_finite(checkpoints, kind):
    path = checkpoints[kind]
    content = torch.load(path, weights_only=True)
    content["state_dict"]["classifier.extra.weight"] = torch.zeros(2)
    torch.save(content, path.with_name("extra.ckpt"))
    with pytest.raises(CheckpointError) as err:
        LOADERS[kind](path.with_name("extra.ckpt"))
    assert "unexpected keys (1): extra.weight" in str(err.value)
    name = nan_in_first_weight(path)
    with pytest.raises(InputValueError) as err:
        LOADERS[kind](path)
    message = str(err.value)
    assert "not finite" in message and name.removeprefix("classifier.") in message


def seed_the_global_generators(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def next_global_draws() -> tuple[list[float], float, float]:
    """The next numbers of torch's, Python's and NumPy's global generators."""
    return torch.rand(3).tolist(), random.random(), float(np.random.random())


@pytest.mark.parametrize("kind", list(LOADERS))
def test_loading_leaves_the_global_random_state_as_it_was(checkpoints, kind):
    """A caller who seeded the global generators draws the same numbers after a load as
    without one: building the module draws initial weights that the file then replaces."""
    seed_the_global_generators(7)
    without_a_load = next_global_draws()
    seed_the_global_generators(7)
    LOADERS[kind](checkpoints[kind])
    assert next_global_draws() == without_a_load


class RecordingDNA(DNATokenizer):
    """The DNA tokenizer under another name, recording the texts it encodes."""

    name = "recording_dna"
    encoded: list[str] = []

    def encode(self, text: str) -> list[int]:
        RecordingDNA.encoded.append(text)
        return super().encode(text)


@pytest.mark.parametrize(
    ("sequences", "refusal"),
    [
        ("ACGTAC", "sequences is one str: give a list of sequences"),
        (["ACGT", 7], "sequences must be str, one of them is a int: 7"),
        (7, "sequences must be a list of str, got int"),
    ],
)
def test_a_finetuned_classifier_predicts_lists_of_str_only(tmp_path, sequences, refusal):
    # One str would be read letter by letter: six one-letter sequences, six class ids.
    finetuned_checkpoint(tmp_path / "new.ckpt")
    oracle = load_finetuned_classifier(tmp_path / "new.ckpt")
    with pytest.raises(InputValueError, match=refusal) as refused:
        oracle.predict(sequences)
    assert refused.value.parameter == "sequences"


def test_a_finetuned_classifier_reads_with_the_tokenizer_it_stores(tmp_path, monkeypatch):
    monkeypatch.setitem(registry._REGISTRIES["tokenizer"], RecordingDNA.name, RecordingDNA)
    monkeypatch.setattr(RecordingDNA, "encoded", [])
    saved = finetuned_checkpoint(tmp_path / "new.ckpt", RecordingDNA.name)
    oracle = load_finetuned_classifier(tmp_path / "new.ckpt")
    assert type(oracle.classifier.tokenizer) is RecordingDNA
    predicted = oracle.predict(["ACGTAC", "GG"])
    assert RecordingDNA.encoded == ["ACGTAC", "GG"]
    ids = torch.tensor([[TOK.pad_id] * 2 + TOK.encode("ACGTAC"), [TOK.pad_id] * 6 + [9, 9]])
    with torch.no_grad():
        assert predicted.tolist() == saved.eval()(ids).argmax(-1).tolist()
    # A checkpoint from before tokenizers were stored reads with the default tokenizer.
    finetuned_checkpoint(tmp_path / "old.ckpt", tokenizer_name=None)
    assert type(load_finetuned_classifier(tmp_path / "old.ckpt").classifier.tokenizer) is (
        DNATokenizer
    )


def test_another_projects_lightning_checkpoint_is_no_kind(tmp_path):
    # upstream MDLM: hyper_parameters.config is its Hydra config (OmegaConf), not a genodiff run's
    path = tmp_path / "mdlm.ckpt"
    config = OmegaConf.create({"model": {"hidden_size": 32}, "backbone": "dit"})
    torch.save(
        {"state_dict": {"backbone.w": torch.zeros(2)}, "hyper_parameters": {"config": config}}, path
    )
    with pytest.raises(UnknownCheckpointError) as err:
        open_checkpoint(path)
    assert str(err.value).startswith(f"{path} is not a genodiff training checkpoint")
    assert "init_from= / pretrained= / load_pretrained" in str(err.value)


LAYERS = """
import json, sys
import genodiff.model
model = sorted(m for m in sys.modules if m.startswith("genodiff.checkpoints"))
import genodiff.checkpoints
higher = ("genodiff.classifiers", "genodiff.finetune", "genodiff.training")
print(json.dumps([model, sorted(m for m in sys.modules if m.startswith(higher))]))
"""


def test_the_loader_imports_no_higher_layer():
    # genodiff.model is what checkpoints build (no import back: no cycle); the classifiers'
    # and fine-tuning's builders import the loader, never the other way round.
    result = subprocess.run(
        [sys.executable, "-c", LAYERS], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == [[], []]


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        ({"w": torch.zeros(2)}, "w holds a torch.Tensor, not a plain value"),
        ({"model": {1: "a"}}, "model has a key that is not a string (1)"),
        ({"data": {"fasta": "???"}}, "data.fasta holds '???', which OmegaConf would resolve"),
        ({"a": [0, "x${y}"]}, "a[1] holds 'x${y}', which OmegaConf would resolve"),
        ({"a": (1, 2)}, "a holds a builtins.tuple, not a plain value"),
    ],
)
def test_a_record_that_is_no_plain_tree_is_named_with_its_key(value, refusal):
    with pytest.raises(InputValueError) as raised:
        plain_tree(value, "f.ckpt", "config")
    assert str(raised.value).startswith(f"f.ckpt: config.{refusal}")


def test_a_plain_tree_copies_omegaconf_unresolved_and_shares_nothing():
    shared = [1, 2]
    config = OmegaConf.create({"model": {"layers": [4, 8]}, "name": "run"})
    copied = plain_tree({"a": shared, "b": shared, "config": config}, "f.ckpt")
    assert copied == {
        "a": [1, 2],
        "b": [1, 2],
        "config": {"model": {"layers": [4, 8]}, "name": "run"},
    }
    assert copied["a"] is not copied["b"] and copied["a"] is not shared
    assert type(copied["config"]) is dict and type(copied["config"]["model"]["layers"]) is list


def test_an_unreadable_checkpoint_path_is_one_input_error(tmp_path):
    # A symlink loop: the load failed with an OSError (ELOOP) that no handler re-raised; the
    # regular-file check before it (no FIFO opened) now names the loop.
    loop = tmp_path / "loop.ckpt"
    loop.symlink_to(loop)
    with pytest.raises(InputValueError, match="loop.ckpt is a loop of symbolic links"):
        read_checkpoint_file(loop)
    broken = tmp_path / "broken.ckpt"
    broken.symlink_to(tmp_path / "gone.ckpt")
    with pytest.raises(FileNotFoundError, match=r"broken.ckpt not found \(a link to .*gone.ckpt"):
        read_checkpoint_file(broken)
