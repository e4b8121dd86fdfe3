"""Models by name (genodiff.named_models): found in GENODIFF_MODELS_PATH and the install's
models/, loaded by every entry point that takes a checkpoint, listed by ``genodiff models``.

The stand-in is a tiny model exported by ``save_pretrained`` into a folder the test names; its
name must then reach the same weights as its folder does."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.config import resolve_checkpoint_reference
from genodiff.named_models import MODELS_ENV, front_matter, named_models
from genodiff.resources import resource
from tests.test_sampling_at_scale import LENGTH, model

CARD = """---
summary: tiny MDLM stand-in for the tests
license: weights CC0-1.0; data: none, the stand-in is trained on nothing
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
        ("tiny-mdlm", "tiny MDLM stand-in for the tests", "licence: weights CC0-1.0"),
    ]
    # The columns are as wide as their longest entry and two spaces.
    longest_summary = max(len(line[summary_at:licence_at].rstrip()) for line in lines)
    assert summary_at == max(len(line.split()[0]) for line in lines) + 2
    assert licence_at == summary_at + longest_summary + 2
    # The list names the weights' licence; the card, all of it (was: the whole licence listed,
    # lines of ~190 characters with the shipped cards')
    assert cli.main(["models", "tiny-mdlm"]) == 0
    assert capsys.readouterr().out == CARD + "\n"


def terminal_lines(capsys, monkeypatch, columns: int) -> list[str]:
    """``genodiff models`` as a terminal of ``columns`` columns shows it."""
    monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli.main(["models"]) == 0
    return capsys.readouterr().out.splitlines()


def test_on_a_terminal_each_model_is_one_row_of_it_name_first(zoo, capsys, monkeypatch):
    """Was: the lines, ~190 characters with the shipped models' cards, wrapped to two or three
    rows each in an 80- or 120-column terminal, the licence broken mid-phrase."""
    assert cli.main(["models"]) == 0
    whole = capsys.readouterr().out.splitlines()  # a pipe's: every line whole
    names = [line.split()[0] for line in whole]
    summaries = {m.name: m.summary for m in named_models().values()}
    assert max(len(line) for line in whole) > 80  # the case to show (the shipped models)
    for columns in (80, 120):
        lines = terminal_lines(capsys, monkeypatch, columns)
        assert [line.split()[0] for line in lines] == names
        assert all(len(line) <= columns and "licence" not in line for line in lines)
        for name, line in zip(names, lines, strict=True):
            shown = line[len(name) :].strip()
            summary = summaries[name]
            assert shown == summary or (shown.endswith("…") and summary.startswith(shown[:-1]))
    assert terminal_lines(capsys, monkeypatch, 400) == whole  # room for every line


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


def test_a_model_folder_copied_in_part_is_said_where_its_name_is_not_found(zoo, capsys):
    partial = Path(os.environ[MODELS_ENV]) / "half-copied"
    shutil.copytree(Path(os.environ[MODELS_ENV]) / "tiny-mdlm", partial)
    (partial / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError) as missing:
        genodiff.load("half-copied")
    message = str(missing.value)
    assert "\n" not in message
    assert f"{partial} lacks model.safetensors (" in message  # config.json is there
    assert cli.main(["models", "half-copied"]) == 2
    assert f"{partial} lacks model.safetensors" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError) as missing:
        genodiff.load("huge")  # no folder of that name: nothing said of one
    assert "lacks" not in str(missing.value)


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
        (
            CARD,
            {
                "summary": "tiny MDLM stand-in for the tests",
                "license": "weights CC0-1.0; data: none, the stand-in is trained on nothing",
                "tags": "",
            },
        ),
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
    os.rmdir("tiny-mdlm")
    model("d3pm").save_pretrained("tiny-mdlm", weights="raw")  # a model this time: it loads
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert genodiff.load("tiny-mdlm").network.config["objective"]["name"] == "d3pm"
    # Said once, though the folder's path is read again when its weights load.
    assert len([w for w in said if "wins over the model named" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ./NAME, as the warning advises: nothing to say
        assert genodiff.load("./tiny-mdlm").network.config["objective"]["name"] == "d3pm"
    os.chdir(tmp_path / "zoo")  # the named model's own folder: no other to warn of
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert genodiff.load("tiny-mdlm").network.config["objective"]["name"] == "mdlm"


def test_a_hidden_or_unprintable_folder_is_no_name(zoo, tmp_path, capsys):
    """Was: ``.hidden`` listed by ``genodiff models`` and its card printed, yet
    ``genodiff.load('.hidden')`` said "not found ...; did you mean .hidden?" (a name starting
    with '.' is a path); a name holding a newline listed across two lines."""
    zoo_folder = tmp_path / "zoo"
    for odd in (".hidden", "two\nlines"):
        shutil.copytree(zoo_folder / "tiny-mdlm", zoo_folder / odd)
    assert sorted(named_models()) == sorted(["bare", "tiny-mdlm", *shipped_names()])
    assert cli.main(["models"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == list(named_models())  # a name a line
    assert cli.main(["models", ".hidden"]) == 2
    with pytest.raises(FileNotFoundError) as missing:
        genodiff.load(".hidden")
    assert "did you mean" not in str(missing.value)


def test_a_cards_control_characters_never_reach_the_terminal(zoo, tmp_path, capsys):
    """A card from a shared folder is printed by ``genodiff models`` (its summary) and
    ``genodiff models NAME`` (all of it): an escape sequence in it (clear the screen, set the
    title) would act on the user's terminal. Control characters but tab and newline show as
    U+FFFD."""
    card = tmp_path / "zoo" / "tiny-mdlm" / "README.md"
    card.write_bytes(  # with Windows line ends, which stay line ends
        b"---\r\nsummary: tiny\x1b[2J model\x07\r\n---\r\n\x1b]0;title\x07body\tend\r\n"
    )
    assert cli.main(["models"]) == 0
    listing = capsys.readouterr().out
    assert "tiny\ufffd[2J model\ufffd " in listing  # the summary, its line end not in it
    assert cli.main(["models", "tiny-mdlm"]) == 0
    printed = capsys.readouterr().out
    assert "\ufffd]0;title\ufffdbody\tend\n" in printed
    assert not [c for c in listing + printed if ord(c) < 0x20 and c not in "\t\n"]


def shipped_names() -> list[str]:
    """The models of this install's models/ folder, by their folders (independent of the
    lookup): every folder there holding config.json and model.safetensors."""
    shipped = resource("models")
    return [
        p.name
        for p in shipped.iterdir()
        if (p / "config.json").is_file() and (p / "model.safetensors").is_file()
    ]


def test_a_models_path_entry_that_cannot_be_read_is_said_and_the_rest_still_load(zoo, tmp_path):
    """Was: an OSError from GENODIFF_MODELS_PATH (a folder of too long a name here, as
    root reads any folder; an unreadable one as any other user) a traceback from
    ``genodiff models``, from every load by name, and from loading a local folder of the
    working directory (its spelling is checked against the names)."""
    too_long = str(tmp_path / ("x" * 300))
    os.environ[MODELS_ENV] = os.pathsep.join([too_long, os.environ[MODELS_ENV]])
    model("d3pm").save_pretrained("local", weights="raw")  # in the working directory
    with pytest.warns(UserWarning, match=r"cannot be read \(File name too long\)") as said:
        assert genodiff.load("local").network.config["objective"]["name"] == "d3pm"
        assert genodiff.load("tiny-mdlm").network.config["objective"]["name"] == "mdlm"
        assert {"bare", "tiny-mdlm"} <= set(named_models())
    assert f"take it out of {MODELS_ENV}" in str(said[0].message)


def deny(monkeypatch, folder: Path, card: Path) -> None:
    """What the system answers for ``folder`` and ``card`` made unreadable (chmod 000), for
    any user (root reads them anyway): a stat inside ``folder`` and the opening of ``card``
    fail with EACCES, while the folder itself and the card's own stat still answer."""
    denied = OSError(errno.EACCES, os.strerror(errno.EACCES))
    is_file, open_file = Path.is_file, Path.open

    def checked_is_file(path: Path) -> bool:
        if path.parent == folder:
            raise PermissionError(*denied.args)
        return is_file(path)

    def checked_open(path: Path, *args, **kwargs):
        if path == card:
            raise PermissionError(*denied.args)
        return open_file(path, *args, **kwargs)

    monkeypatch.setattr(Path, "is_file", checked_is_file)
    monkeypatch.setattr(Path, "open", checked_open)


def test_an_unreadable_model_folder_or_card_is_said_and_the_rest_still_load(
    zoo, tmp_path, capsys, monkeypatch
):
    zoo_folder = tmp_path / "zoo"
    shutil.copytree(zoo_folder / "tiny-mdlm", zoo_folder / "locked")
    shutil.copytree(zoo_folder / "tiny-mdlm", zoo_folder / "cardless")
    deny(monkeypatch, zoo_folder / "locked", zoo_folder / "cardless" / "README.md")
    with pytest.warns(UserWarning, match="locked cannot be read"):
        models = named_models()
        assert genodiff.load("tiny-mdlm").network.config["objective"]["name"] == "mdlm"
    assert "locked" not in models
    assert models["cardless"].summary == "(model card unreadable: Permission denied)"
    assert cli.main(["models", "cardless"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(
        "README.md cannot be read (Permission denied): make it readable to see the card"
    )


def test_a_file_or_a_model_folder_named_as_a_folder_of_models_is_said(zoo, tmp_path):
    """Was: passed over in silence, as a missing folder is (a lab's path absent on a laptop):
    a models path naming a model's own folder, or a file, is a mistake to say."""
    (tmp_path / "notes.txt").write_text("not a folder")
    for entry, said in [
        (tmp_path / "zoo" / "tiny-mdlm", "a model's own folder: name the folder it lies in"),
        (tmp_path / "notes.txt", "which is no folder: name a folder of models"),
    ]:
        os.environ[MODELS_ENV] = str(entry)
        with pytest.warns(UserWarning, match=re.escape(f"{MODELS_ENV} names {entry}, {said}")):
            assert "bare" not in named_models()
