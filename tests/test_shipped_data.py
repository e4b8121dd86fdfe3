"""A shipped model names its training data portably (genodiff.data.training_files), and
``Model.windows`` of a model whose data file is gone says which file it needs in one line.

A tiny model is trained on the CPU on a FASTA in a temporary folder and exported the way
bench/ship_model.py exports (``export``: ``save_pretrained(portable_data=True)``); then the
FASTA is moved away, as it is on a user's machine. Digests are computed here with hashlib and
gzip, not with the code under test.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

import genodiff
from genodiff import cli
from genodiff.data.training_files import locate_data, portable_record
from genodiff.errors import InputFileNotFoundError, InputValueError
from tests.test_bench_scripts import load_bench_script
from tests.test_cli import DEMO, ROOT, TINY

SOURCE = "the test's own slice of S. aureus (tests/test_shipped_data.py)"
SPECIES = ROOT / "data" / "species"


def decompressed_sha256(path: Path) -> str:
    return hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """(training folder, its FASTA, the run, the folder ship_model's export wrote, the test
    windows the run's own checkpoint reads while its data is in place)."""
    machine = tmp_path_factory.mktemp("training_machine")
    fasta = machine / "train.fa.gz"
    shutil.copyfile(SPECIES / "s_aureus_n315.fa.gz", fasta)  # 120 kb, BGZF
    options = [
        *TINY,
        f"data.fasta={fasta}",
        f"data.cache_dir={machine / 'index'}",
        "trainer.max_steps=2",
        "evaluate_test=false",
    ]
    run = genodiff.train(DEMO, options, output_dir=machine / "run", progress=False)
    model = genodiff.load(run)
    before = model.windows("test")
    ship_model = load_bench_script("ship_model")
    folder = tmp_path_factory.mktemp("models") / "tiny"
    assert ship_model.export(model, folder, SOURCE) == "ema"
    return machine, fasta, run, folder, before


def strings_of(tree) -> list[str]:
    if isinstance(tree, dict):
        return [s for value in tree.values() for s in strings_of(value)]
    if isinstance(tree, list):
        return [s for value in tree for s in strings_of(value)]
    return [tree] if isinstance(tree, str) else []


def test_the_export_names_no_path_of_the_training_machine(shipped):
    machine, fasta, _, folder, _ = shipped
    record = json.loads((folder / "genodiff.json").read_text())
    strings = strings_of(record)
    assert not [s for s in strings if s.startswith("/") or str(machine) in s]
    assert record["config"]["data"]["fasta"] == "train.fa.gz"
    assert record["config"]["data"]["cache_dir"] is None
    assert record["config"]["output_dir"] == "run"
    assert record["data_files"] == [
        {
            "key": "fasta",
            "entry": None,
            "file": "train.fa.gz",
            "path": None,
            "content_sha256": decompressed_sha256(fasta),
            "source": SOURCE,
        }
    ]


def test_windows_of_a_model_whose_data_is_gone_names_it_and_reads_a_copy(shipped, tmp_path):
    machine, fasta, _, folder, before = shipped
    moved = tmp_path / "elsewhere.fa.gz"
    shutil.move(fasta, moved)
    try:
        model = genodiff.load(folder)  # the checks of the config pass on loading
        with pytest.raises(InputFileNotFoundError) as missing:
            model.windows("test")
        message = str(missing.value)
        assert "\n" not in message and missing.value.parameter == "fasta"
        for part in ("train.fa.gz", decompressed_sha256(moved), SOURCE, "fasta=PATH"):
            assert part in message, (part, message)

        assert model.windows("test", fasta=moved) == before
        plain = tmp_path / "plain.fa"  # the same content, not compressed: the same file
        plain.write_bytes(gzip.decompress(moved.read_bytes()))
        assert model.windows("test", fasta=plain) == before
        sequence = "".join(plain.read_text().splitlines()[1:]).upper()
        assert before and all(window in sequence for window in before[:5])

        other = SPECIES / "e_coli_536.fa.gz"  # other content: refused, naming both digests
        with pytest.raises(InputValueError) as refused:
            model.windows("test", fasta=other)
        assert decompressed_sha256(other) in str(refused.value)
        assert decompressed_sha256(moved) in str(refused.value)
        with pytest.raises(InputValueError, match="fasta"):
            model.windows("test", genome=moved)
        with pytest.raises(InputFileNotFoundError, match="not found"):
            model.windows("test", fasta=tmp_path / "none.fa.gz")
        with pytest.raises(InputValueError, match="path of a file"):
            model.windows("test", fasta=3)
    finally:
        shutil.move(moved, fasta)


def test_eval_of_the_test_split_says_which_file_is_missing_in_one_line(shipped, tmp_path, capsys):
    _, fasta, _, folder, _ = shipped
    moved = tmp_path / "elsewhere.fa.gz"
    shutil.move(fasta, moved)
    try:
        assert cli.main(["eval", "--checkpoint", str(folder), "--no-progress"]) == 2
    finally:
        shutil.move(moved, fasta)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "train.fa.gz" in line and "--file" in line and "Traceback" not in line


def test_eval_of_a_file_named_as_the_training_file_matches_it_by_content(
    shipped, tmp_path, monkeypatch
):
    # a portable export names its FASTA train.fa.gz, relative to no folder: a file of that name
    # in the working directory is the training data only when its bytes are (data_digest)
    from genodiff.evaluate import evaluate_checkpoint

    _, fasta, _, folder, _ = shipped
    monkeypatch.chdir(tmp_path)
    namesake = tmp_path / "train.fa.gz"
    shutil.copyfile(SPECIES / "e_coli_536.fa.gz", namesake)
    other = evaluate_checkpoint(folder, namesake, num_windows=2)
    assert other.overlaps_training_data is False
    shutil.copyfile(fasta, namesake)
    same = evaluate_checkpoint(folder, namesake, num_windows=2)
    assert same.overlaps_training_data is True


def test_a_shipped_model_exported_again_keeps_the_records_of_its_data(shipped, tmp_path):
    _, fasta, _, folder, _ = shipped
    moved = tmp_path / "elsewhere.fa.gz"
    shutil.move(fasta, moved)  # no file to hash: the records come from the first export
    try:
        again = genodiff.load(folder).save_pretrained(tmp_path / "again", portable_data=True)
    finally:
        shutil.move(moved, fasta)
    first, second = (json.loads((f / "genodiff.json").read_text()) for f in (folder, again))
    assert second["data_files"] == first["data_files"]
    assert second["data_files"][0]["content_sha256"] == decompressed_sha256(fasta)
    assert second["config"]["data"] == first["config"]["data"]


def test_an_export_that_is_not_portable_names_the_path_it_recorded(shipped, tmp_path):
    _, fasta, run, _, _ = shipped
    folder = genodiff.load(run).save_pretrained(tmp_path / "local")
    moved = tmp_path / "elsewhere.fa.gz"
    shutil.move(fasta, moved)
    try:
        with pytest.raises(InputFileNotFoundError, match=f"not at {fasta}"):
            genodiff.load(folder).windows("valid")
    finally:
        shutil.move(moved, fasta)
    with pytest.raises(InputValueError, match="portable_data"):
        genodiff.load(run).save_pretrained(tmp_path / "x", data_source=SOURCE)


def labelled_config(cache_dir: Path) -> dict:
    files = {
        "human": str(ROOT / "data" / "chr22_20-21Mb.fa.gz"),
        "e_coli": str(SPECIES / "e_coli_536.fa.gz"),
    }
    data = {"name": "labelled", "fasta_by_label": files, "max_length": 256}
    return {"output_dir": "/somewhere/run", "data": {**data, "cache_dir": str(cache_dir)}}


def test_the_repository_files_are_named_by_their_path_there_and_found_from_anywhere(
    tmp_path, monkeypatch
):
    entries = portable_record(labelled_config(tmp_path / "index"), SOURCE)
    data = entries["config"]["data"]
    assert data["fasta_by_label"] == {
        "human": "data/chr22_20-21Mb.fa.gz",
        "e_coli": "data/species/e_coli_536.fa.gz",
    }
    assert data["cache_dir"] is None and entries["config"]["output_dir"] == "run"
    human, e_coli = entries["data_files"]
    assert (human["entry"], human["path"], human["source"]) == (
        "human",
        "data/chr22_20-21Mb.fa.gz",
        None,
    )
    assert e_coli["content_sha256"] == decompressed_sha256(SPECIES / "e_coli_536.fa.gz")

    monkeypatch.chdir(tmp_path)  # not the repository: its files are found all the same
    located = locate_data(data, entries["data_files"])
    assert Path(located["fasta_by_label"]["e_coli"]).samefile(SPECIES / "e_coli_536.fa.gz")
    copy = tmp_path / "human.fa.gz"
    shutil.copyfile(ROOT / "data" / "chr22_20-21Mb.fa.gz", copy)
    given = locate_data(data, entries["data_files"], {"fasta_by_label": {"human": copy}})
    assert given["fasta_by_label"]["human"] == str(copy)

    changed = [{**human, "content_sha256": "0" * 64}, e_coli]  # the file is not the one trained
    with pytest.raises(InputValueError, match="chr22_20-21Mb.fa.gz"):
        locate_data(data, changed)
    with pytest.raises(InputValueError, match="human"):
        locate_data(data, entries["data_files"], {"fasta_by_label": copy})
