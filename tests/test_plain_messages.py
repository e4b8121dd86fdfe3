"""Errors and warnings a user reads say their names and paths as plain text, not in Python's
form: no ``('train', 'valid', 'test')``, ``['a', 'b']``, ``PosixPath('...')`` or
``ConnectionResetError(104, '...')`` inside a message (a name in quotes is fine)."""

from __future__ import annotations

import http.client
import re
import warnings
from importlib.metadata import EntryPoint
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from genodiff import registry
from genodiff.checkpoints.folders import detect_layout
from genodiff.classifiers.run import check_generator
from genodiff.conditioning import record_class_names
from genodiff.data.benchmarks import task_layout
from genodiff.data.download import download
from genodiff.data.hg38 import read_bed
from genodiff.errors import UserInputError
from tests.test_hg38_download import _Server

# A list, tuple or mapping written by repr (its first item a quoted string), a path object,
# an exception object.
PYTHON_FORM = re.compile(r"[\[({]'|\w+Path\(|\w+Error\(")


def plain(message: str) -> str:
    """``message``, checked to hold no Python form."""
    assert PYTHON_FORM.search(message) is None, message
    return message


def refusal(make) -> str:
    with pytest.raises(UserInputError) as refused:
        make()
    return plain(str(refused.value))


def test_a_bed_split_is_refused_naming_the_splits_there_are(tmp_path):
    bed = tmp_path / "bad.bed"
    bed.write_text("chrA\t0\t100\tval\n")
    assert "split must be one of train, valid, test, got 'val'" in refusal(lambda: read_bed(bed))


def test_a_task_whose_splits_have_other_classes_names_them(tmp_path):
    for split, classes in (("train", ("at", "gc")), ("test", ("at", "cg"))):
        for name in classes:
            (tmp_path / "t" / split / name).mkdir(parents=True)
            (tmp_path / "t" / split / name / "0.txt").write_text("ACGT")
    message = refusal(lambda: task_layout(tmp_path, "t", download=False))
    assert "train classes at, gc differ from test classes at, cg" in message


def test_a_config_json_of_no_layout_lists_its_fields(tmp_path):
    message = refusal(lambda: detect_layout({"d_model": 8, "hidden": 4}, tmp_path / "x"))
    assert "its fields: d_model, hidden. " in message  # then how to install a plugin of others


def test_class_labels_that_differ_from_the_data_are_named():
    config = OmegaConf.create({"conditioning": {"labels": ["human", "phage"]}})
    message = refusal(lambda: record_class_names(config, ["human", "e_coli"]))
    assert "conditioning.labels (human, phage) differs from the data's classes (human, e_coli)" in (
        message
    )


def test_a_generator_of_other_classes_is_refused_naming_both():
    generator = SimpleNamespace(
        config={"objective": {"name": "mdlm"}},
        objective=SimpleNamespace(noisy_states=object()),
        class_names=["human", "phage"],
    )
    cfg = OmegaConf.create({"kind": "noisy", "generator": "g.ckpt"})
    message = refusal(lambda: check_generator(generator, cfg, ["human", "e_coli"]))
    assert "trained on the classes human, phage, and the data's are human, e_coli" in message


def test_a_configs_plugin_naming_no_folder_is_named_as_a_path(tmp_path, monkeypatch):
    (tmp_path / "fake_configs_plugin.py").write_text(
        f"from pathlib import Path\nFOLDER = Path({str(tmp_path / 'missing')!r})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = EntryPoint("fake", "fake_configs_plugin:FOLDER", registry.CONFIGS_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert registry.plugin_config_folders() == []
    (warning,) = caught
    assert f"names '{tmp_path / 'missing'}', not a folder" in plain(str(warning.message))


def test_a_network_failure_in_a_download_is_logged_in_words(tmp_path, monkeypatch):
    server = _Server({"/f.gz": b"x" * 5000})
    read1 = http.client.HTTPResponse.read1  # what the download reads the body with
    failures = [ConnectionResetError(104, "Connection reset by peer")]

    def read_failing_once(self, amount=-1):
        if failures and amount:
            raise failures.pop()
        return read1(self, amount)

    monkeypatch.setattr(http.client.HTTPResponse, "read1", read_failing_once)
    logs: list[str] = []
    try:
        download(f"{server.url}/f.gz", tmp_path / "f.gz", log=logs.append, retry_wait=0)
    finally:
        server.close()
    assert (tmp_path / "f.gz").read_bytes() == b"x" * 5000  # resumed after the failure
    (said,) = [plain(line) for line in logs if "interrupted" in line]
    assert said == "  f.gz: transfer interrupted at 0 B (Connection reset by peer)"
