"""``genodiff eval --data KEY=PATH``: the test split of a model whose training data genodiff
does not ship (the chrX models' ``chrX.fa.gz``), read from the user's copy of the file.

The model here is the shipped ``mdlm-chrx`` whose record names, instead of chrX, a file that is
not shipped but whose content is that of the repository's chr22 slice (data/README.md gives its
sha256): the chr22 file is then a valid copy, and any other file is not.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from genodiff import cli

ROOT = Path(__file__).resolve().parents[1]
CHR22 = ROOT / "data" / "chr22_20-21Mb.fa.gz"
OTHER_FASTA = ROOT / "data" / "species" / "s_aureus_n315.fa.gz"  # any other shipped FASTA


@pytest.fixture
def model_of_unshipped_data(tmp_path) -> Path:
    """A copy of mdlm-chrx whose training file is ``slice.fa.gz``, not shipped, with the
    chr22 slice's content sha256."""
    folder = Path(shutil.copytree(ROOT / "models" / "mdlm-chrx", tmp_path / "model"))
    record = json.loads((folder / "genodiff.json").read_text())
    record["config"]["data"]["fasta"] = "slice.fa.gz"
    (entry,) = record["data_files"]
    entry.update(
        file="slice.fa.gz",
        path=None,
        content_sha256=hashlib.sha256(gzip.decompress(CHR22.read_bytes())).hexdigest(),
        source="the test's own copy",
    )
    (folder / "genodiff.json").write_text(json.dumps(record))
    return folder


def eval_args(folder: Path, *more: str) -> list[str]:
    return ["eval", "--checkpoint", str(folder), "--num-windows", "2", "--device", "cpu", *more]


@pytest.mark.parametrize("key", ["fasta", "data.fasta"])  # as a card's table names it
def test_eval_scores_the_test_split_from_a_copy_of_its_data_given_by_data(
    model_of_unshipped_data, capsys, key
):
    copy = str(CHR22)
    assert cli.main(eval_args(model_of_unshipped_data, "--data", f"{key}={copy}")) == 0
    out = capsys.readouterr().out
    # The run's test split (20% of the slice's record, split_fractions of the config), not the
    # whole file's windows that --file scores.
    assert f"windows       2 x 1024 tokens from fasta test split of {copy}" in out


def test_eval_without_the_data_says_how_to_give_it(model_of_unshipped_data, capsys):
    assert cli.main(eval_args(model_of_unshipped_data)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "slice.fa.gz" in err
    # Was: "give a copy of it (fasta=PATH in data_files), or a file of your own to score
    # instead (data_file) (--data, --file)": the Python keywords, with the options after them.
    assert "give a copy of it as fasta=PATH (--data)" in err
    assert err.endswith("or a file of your own to score instead (--file)")
    assert not re.search(r"\bdata_files?\b", err), err  # no keyword the command line lacks


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (f"fasta={OTHER_FASTA}", "is not a copy of slice.fa.gz"),
        ("fasta", "--data fasta: give KEY=PATH"),
        (f"fasta_by_label={CHR22}", "fasta_by_label: the model's data (fasta) has no file by"),
    ],
)
def test_eval_refuses_a_data_copy_that_is_not_the_runs_file(
    model_of_unshipped_data, capsys, given, said
):
    assert cli.main(eval_args(model_of_unshipped_data, "--data", given)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err, err


def data_places(model: str) -> list[str]:
    """The data files a shipped model's record names, as ``--data`` takes them: ``fasta``,
    ``fasta_by_label.human`` (read here from its genodiff.json)."""
    data = json.loads((ROOT / "models" / model / "genodiff.json").read_text())["config"]["data"]
    if "fasta_by_label" in data:
        return [f"fasta_by_label.{entry}" for entry in data["fasta_by_label"]]
    return ["fasta"]


@pytest.mark.parametrize(
    ("model", "given", "names"),  # names: the model's data keys, or the entries of its one key
    [
        ("mdlm-chrx", "bogus=x.fa", "keys"),
        ("mdlm-chrx", "fasta.human=x.fa", "keys"),
        ("species-conditional", "bogus=x.fa", "keys"),
        ("species-conditional", "fasta_by_label=x.fa", "entries"),
        ("species-conditional", "fasta_by_label.zz=x.fa", "entries"),
    ],
)
def test_an_unknown_data_key_is_one_plain_line_naming_the_known_ones(model, given, names, capsys):
    """Was: a Python mapping in the line (``fasta_by_label={'human': PATH}; got {'zz':
    'x.fa'}``, ``got dict``) where the command line takes ``fasta_by_label.human=PATH``."""
    assert cli.main(eval_args(ROOT / "models" / model, "--data", given)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("genodiff eval: error: ")
    places = data_places(model)
    known = places if names == "keys" else [place.split(".")[1] for place in places]
    assert ", ".join(known) in err  # the keys (or entries) there are
    assert err.endswith(f" as {places[0]}=PATH (--data)")  # what to give, as --data takes it
    assert not set('{}[]"') & set(err), err  # no Python form of a mapping or a list
    assert not re.search(r"[\s(=:]'", err), err  # nor of a string ('x.fa')


@pytest.mark.parametrize("model", ["mdlm-chrx", "species-conditional"])
def test_a_missing_data_copy_is_named_with_the_file_it_stands_for(model, tmp_path, capsys):
    # Was: "fasta_by_label=: /x.fa not found (given for ...)", a key with no entry and no value
    place = data_places(model)[0]
    missing = tmp_path / "absent.fa"
    assert cli.main(eval_args(ROOT / "models" / model, "--data", f"{place}={missing}")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"genodiff eval: error: {missing} not found (the copy given for ")
    assert f"(data.{place}, content sha256 " in err and len(err.splitlines()) == 1


def test_a_missing_data_copy_points_at_the_copy_alone(tmp_path, capsys):
    """Was ``... not found (the copy given for ...) (--data, --file)``: --file, which the
    user did not give and which would not mend the path given to --data, named beside it."""
    missing = tmp_path / "absent.fa"
    assert cli.main(eval_args(ROOT / "models" / "mdlm-chrx", "--data", f"fasta={missing}")) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(") (--data)") and "--file" not in err


def test_eval_refuses_data_copies_with_a_file_to_score(model_of_unshipped_data, capsys):
    argv = eval_args(model_of_unshipped_data, "--data", f"fasta={CHR22}", "--file", str(CHR22))
    assert cli.main(argv) == 2
    assert "give one or the other" in capsys.readouterr().err
