"""What a fine-tuning shows and returns: its fold lines, Lightning's notices, the result files'
paths, the leftovers a resume clears, and ``genodiff info`` of a fold's classifier."""

from __future__ import annotations

import genodiff
from genodiff import cli


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
