"""save_pretrained / genodiff export with the Hugging Face convention: write into an existing
folder, replace the files a save owns (all of them: a model saved there before, each file
atomically), never delete anything else."""

import os
import stat
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.backbones import build
from genodiff.checkpoints import folders, load_pretrained, save_pretrained
from genodiff.model import GenerativeModel
from genodiff.tokenizers import DNATokenizer
from tests.checkpoint_files import save_as_trained
from tests.test_generation_config import tiny
from tests.test_hub import assert_same, training_checkpoint

MAMBA = dict(name="mamba", d_model=16, n_layer=2, vocab_size=12)


def model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build(**MAMBA).eval()


def snapshot(folder) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def user_folder(tmp_path):
    """An output folder the user already keeps other things in."""
    folder = tmp_path / "out"
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "loss.png").write_bytes(b"\x89PNG not really")
    (folder / "notes.md").write_text("my notes\n")
    (folder / "pytorch_model.bin").write_bytes(b"an older upstream file, not ours to delete")
    return folder


def test_saving_into_a_folder_keeps_every_other_file(user_folder):
    before = snapshot(user_folder)
    a = model(1)
    save_pretrained(a, user_folder, tokenizer=DNATokenizer())
    after = snapshot(user_folder)
    assert {k: after[k] for k in before} == before
    assert set(after) - set(before) == {"config.json", "model.safetensors", "tokenizer.json"}
    assert_same(load_pretrained(user_folder), a)


def test_owned_files_are_replaced_only_with_overwrite(user_folder):
    a, b = model(1), model(2)
    save_pretrained(a, user_folder)
    before = snapshot(user_folder)
    with pytest.raises(
        FileExistsError, match="config.json, model.safetensors already exist.*or overwrite them"
    ) as caught:
        save_pretrained(b, user_folder)
    assert caught.value.parameter == "overwrite"
    assert snapshot(user_folder) == before
    save_pretrained(b, user_folder, overwrite=True)
    assert_same(load_pretrained(user_folder), b)
    after = snapshot(user_folder)
    assert {k: after[k] for k in ("notes.md", "plots/loss.png", "pytorch_model.bin")} == {
        k: before[k] for k in ("notes.md", "plots/loss.png", "pytorch_model.bin")
    }
    assert after["model.safetensors"] != before["model.safetensors"]


def crash_writing_weights(path, data):  # Path.write_bytes, which writes the weights' file
    with open(path, "wb") as handle:
        handle.write(data[:10])  # what a dying process would leave
    raise OSError("disk full")


def crash_writing_json(*args, **kwargs):  # the weights are written by then
    raise OSError("disk full")


@pytest.mark.parametrize(
    "module, name, crash",
    [
        (Path, "write_bytes", crash_writing_weights),
        (folders.json, "dumps", crash_writing_json),
    ],
)
def test_a_crash_mid_write_leaves_the_previous_files_intact(
    user_folder, monkeypatch, module, name, crash
):
    a = model(1)
    save_pretrained(a, user_folder, tokenizer=DNATokenizer())
    before = snapshot(user_folder)
    monkeypatch.setattr(module, name, crash)
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(model(2), user_folder, overwrite=True, tokenizer=DNATokenizer())
    assert snapshot(user_folder) == before  # nothing replaced, no temporary file left behind
    monkeypatch.undo()
    assert_same(load_pretrained(user_folder), a)


def test_a_failed_save_into_new_folders_removes_every_folder_it_made(tmp_path, monkeypatch):
    """Only the deepest folder was removed again: a save to a/b/c that failed left a/b."""
    (tmp_path / "kept").mkdir()
    monkeypatch.setattr(folders.json, "dumps", crash_writing_json)
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(model(1), tmp_path / "kept" / "a" / "b" / "c", tokenizer=DNATokenizer())
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]


@pytest.mark.parametrize("folder", [None, 3])
def test_an_output_folder_that_is_no_path_is_one_line_naming_it(folder):
    with pytest.raises(ValueError) as refused:  # was os.fspath's TypeError
        tiny().save_pretrained(folder, weights="raw")
    assert str(refused.value) == (
        f"the output folder must be a path (a str or a Path), got {folder!r}"
    )
    assert refused.value.parameter == "out"


def test_an_output_folder_below_a_file_is_one_line_before_anything_is_written(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("mine")
    with pytest.raises(ValueError) as refused:  # was NotADirectoryError from mkdir
        tiny().save_pretrained(taken / "model", weights="raw")
    assert str(refused.value) == (
        f"cannot write {taken}/model/config.json ({taken}: a file, not a folder); choose a "
        "folder you can write to"
    )
    assert refused.value.parameter == "out" and taken.read_text() == "mine"


def test_written_files_get_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    folder = save_pretrained(model(1), tmp_path / "m")
    for name in ("config.json", "model.safetensors"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o666 & ~umask


def test_export_writes_into_an_existing_folder(tmp_path, user_folder, capsys):
    ckpt = tmp_path / "run" / "last.ckpt"
    trained = training_checkpoint(ckpt, seed=3)
    before = snapshot(user_folder)
    args = ["export", "--checkpoint", str(ckpt), "--out", str(user_folder)]
    assert cli.main(args) == 0
    written = snapshot(user_folder)
    assert {k: written[k] for k in before} == before
    assert set(written) - set(before) == {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "genodiff.json",
    }
    assert_same(load_pretrained(user_folder), trained.eval_backbone)

    assert cli.main(args) == 2  # owned files exist: refused without --overwrite
    err = capsys.readouterr().err.strip()
    assert "already exist" in err and err.endswith(
        "or overwrite them (other files there are kept) (--overwrite)"
    )
    assert "overwrite=True" not in err  # the command line has no Python keywords
    training_checkpoint(ckpt, seed=4)
    assert cli.main([*args, "--overwrite"]) == 0
    after = snapshot(user_folder)
    assert {k: after[k] for k in before} == before
    assert after["model.safetensors"] != written["model.safetensors"]


def test_overwrite_replaces_the_whole_saved_model(tmp_path, user_folder):
    """A save over an export writes no genodiff.json or tokenizer.json: those of the export
    go too, or the folder would load as the exported run with the new weights."""
    ckpt = tmp_path / "run" / "last.ckpt"
    training_checkpoint(ckpt, seed=3)
    others = snapshot(user_folder)
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(user_folder)]) == 0
    assert (user_folder / "genodiff.json").is_file()
    retrained = training_checkpoint(tmp_path / "run2" / "last.ckpt", seed=4)
    save_pretrained(retrained.eval_backbone, user_folder, overwrite=True)
    after = snapshot(user_folder)
    assert set(after) - set(others) == {"config.json", "model.safetensors"}
    assert {k: after[k] for k in others} == others  # nothing genodiff did not write is gone
    assert_same(load_pretrained(user_folder), retrained.eval_backbone)
    with pytest.raises(FileNotFoundError, match="holds no genodiff.json"):  # a bare backbone
        genodiff.load(user_folder)


def test_overwrite_without_a_tokenizer_removes_the_earlier_one(tmp_path):
    folder = save_pretrained(model(1), tmp_path / "m", tokenizer=DNATokenizer())
    save_pretrained(model(2), folder, overwrite=True)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]


def test_a_folder_holding_part_of_a_saved_model_needs_overwrite(tmp_path):
    folder = save_pretrained(model(1), tmp_path / "m", tokenizer=DNATokenizer())
    for name in ("config.json", "model.safetensors"):
        (folder / name).unlink()
    with pytest.raises(FileExistsError, match="tokenizer.json already exist"):
        save_pretrained(model(2), folder)
    assert sorted(p.name for p in folder.iterdir()) == ["tokenizer.json"]


PLAID = {
    "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
    "objective": {"name": "plaid", "d_model": 16, "schedule_hidden": 16},
}


def test_a_model_whose_objective_has_weights_is_not_exported(tmp_path, capsys):
    """A folder holds a backbone; Plaid's embeddings and schedule would be lost, and the
    folder refused on loading: refused before anything is written, in one line."""
    ckpt = tmp_path / "last.ckpt"
    save_as_trained(ckpt, GenerativeModel(PLAID))
    with pytest.raises(ValueError, match="plaid objective has learned parameters.*run's .ckpt"):
        genodiff.load(ckpt).save_pretrained(tmp_path / "saved")
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "plaid objective has learned parameters" in err and "\n" not in err
    assert not (tmp_path / "saved").exists() and not (tmp_path / "out").exists()
