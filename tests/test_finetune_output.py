"""What a fine-tuning shows and returns: its fold lines, Lightning's notices, the result files'
paths, the leftovers a resume clears, and ``genodiff info`` of a fold's classifier."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import genodiff
from genodiff import cli
from genodiff.finetuning.module import ClassifierModule


def test_a_one_epoch_fold_is_said_to_take_1_epoch(toy, capsys):
    config, _ = toy  # trainer.max_epochs: 1
    genodiff.finetune(str(config), progress=False)
    lines = [line for line in capsys.readouterr().out.splitlines() if ": val acc " in line]
    assert len(lines) == 2  # two folds
    assert all("(1 epoch, " in line for line in lines)  # was: "(1 epochs, "


def test_the_returned_files_are_found_from_any_working_directory(toy, tmp_path, monkeypatch):
    config, _ = toy
    monkeypatch.chdir(tmp_path)
    results = genodiff.finetune(str(config), output_dir="relative_out", progress=False)
    monkeypatch.chdir(tmp_path / "data")  # elsewhere: a relative path would point nowhere
    assert results.output_dir == tmp_path / "relative_out"
    assert set(results.files) == {"csv", "json", "md", "png"}
    for path in results.files.values():
        assert path.is_absolute() and path.parent == tmp_path / "relative_out"
        assert path.is_file()


def test_lightnings_notices_are_said_once_not_once_per_fold(toy):
    config, _ = toy  # 2 folds: 2 Trainers in one process
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "genodiff.cli", "finetune", str(config)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("GPU available:") == 1  # was: once per fold
    assert done.stderr.count("`Trainer.fit` stopped: `max_epochs=1` reached") == 1
    assert done.stdout.count(": val acc ") == 2  # genodiff's own line for each fold stays


class StopFoldError(ValueError):
    """Stands in for a crash in the middle of a fold."""


def finetune_until_fold_1_is_killed(config, overrides: list[str], monkeypatch) -> None:
    """Fine-tune the toy with ``overrides`` (2 epochs or more) until a crash in fold 1's
    second epoch: fold 0 is done, fold 1 has a last.ckpt to resume from."""
    original = ClassifierModule.training_step

    def crash_in_epoch_1_of_fold_1(self, batch, batch_idx):
        if self.current_epoch == 1 and self.trainer.default_root_dir.endswith("fold1"):
            raise StopFoldError("killed in the middle of fold 1, epoch 1")
        return original(self, batch, batch_idx)

    with monkeypatch.context() as patch:
        patch.setattr(ClassifierModule, "training_step", crash_in_epoch_1_of_fold_1)
        with pytest.raises(StopFoldError):
            genodiff.finetune(str(config), overrides, progress=False)


def test_a_fold_says_its_resume_once_and_lightning_no_checkpoint_read(
    toy, monkeypatch, capsys, lightning_lines
):
    """Each fold's test reads its selected checkpoint and a resumed fit its last.ckpt: Lightning
    said "Restoring states from the checkpoint path at ..." (and "Loaded model weights ..." /
    "Restored all states ...") for each, once per fold. A user needs genodiff's own line for a
    resumed fold, naming it and the file, and nothing for a fold's test."""
    config, out = toy
    overrides = ["trainer.max_epochs=2", "early_stopping.patience=5"]
    finetune_until_fold_1_is_killed(config, overrides, monkeypatch)
    genodiff.finetune(str(config), overrides, progress=False)  # fold 1 resumes
    reads = [line for line in lightning_lines if "from the checkpoint" in line]
    assert reads == []  # fold 0's test, fold 1's resume and test: no line of Lightning's
    printed = capsys.readouterr().out.splitlines()
    resumes = [line for line in printed if "resuming" in line]
    last = out / "runs" / "toy" / "lr0.003_bs8" / "fold1" / "checkpoints" / "last.ckpt"
    assert len(resumes) == 1 and resumes[0].startswith("genodiff finetune: ")
    assert resumes[0].endswith(f"fold1 (of fold0..fold1): resuming from {last}")


def test_a_resumed_fold_removes_the_checkpoint_its_killed_part_was_writing(
    toy, monkeypatch, capsys
):
    config, out = toy
    overrides = ["keep_checkpoints=true", "trainer.max_epochs=2", "early_stopping.patience=5"]
    finetune_until_fold_1_is_killed(config, overrides, monkeypatch)
    checkpoints = out / "runs" / "toy" / "lr0.003_bs8" / "fold1" / "checkpoints"
    assert (checkpoints / "last.ckpt").is_file()
    # What a process killed while it wrote last.ckpt leaves (genodiff.atomic_files).
    leftover = checkpoints / ".last.ckpt.4242.tmp"
    leftover.write_bytes(b"half a checkpoint")
    capsys.readouterr()
    genodiff.finetune(str(config), overrides, progress=False)
    assert f"resuming from {checkpoints / 'last.ckpt'}" in capsys.readouterr().out
    selected = json.loads((checkpoints.parent / "result.json").read_text())["checkpoint"]
    # The fold's folder holds its selected checkpoint alone (was: the leftover too, forever).
    assert sorted(p.name for p in checkpoints.iterdir()) == [os.path.basename(selected)]


def test_info_of_a_fine_tuned_classifier_lists_its_classes_without_a_null_label(toy, capsys):
    config, out = toy
    genodiff.finetune(str(config), ["keep_checkpoints=true"], progress=False)
    capsys.readouterr()
    assert cli.main(["info", str(out / "runs" / "toy" / "lr0.003_bs8" / "fold0")]) == 0
    text = capsys.readouterr().out
    assert "holds:       classifier fine-tuned on toy (genodiff finetune)" in text
    # A classifier has its classes only; the null label (p(x)) is a conditional generator's.
    assert "classes:     at, gc\n" in text
    assert "null label" not in text
