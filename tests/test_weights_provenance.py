"""Sample files name the weights they were drawn with: the checkpoint's training step and a
CRC-32 of the weights sampled with, beside its path (a run keeps overwriting ``last.ckpt``);
and a run that ends before its first validation still scores its test split, saying so."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from Bio import SeqIO

from genodiff import cli
from genodiff.checkpoints import load_model
from genodiff.checkpoints.folders import tensors_digest
from genodiff.sample_files import read_sample_labels
from genodiff.sample_formats import SamplingRun
from tests.test_cli import DEMO, TINY, read_metrics

# 3 steps, validation every 5: the run ends before its first validation.
NO_VALIDATION = [o for o in TINY if not o.startswith(("trainer.max_steps", "trainer.val_check"))]
NO_VALIDATION += ["trainer.max_steps=3", "trainer.val_check_interval=5"]
SAMPLE = ["--num-samples", "2", "--length", "32", "--steps", "4"]


def header_words(path) -> dict[str, str]:
    """The key=value words of the first FASTA record's header."""
    description = next(SeqIO.parse(path, "fasta")).description
    return dict(word.split("=", 1) for word in description.split()[1:])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    assert cli.main(["train", DEMO, *NO_VALIDATION, f"output_dir={out}"]) == 0
    return out


def test_a_run_ended_before_its_first_validation_scores_its_last_weights(run, capsys):
    out = run.parent / "again"
    assert cli.main(["train", DEMO, *NO_VALIDATION, f"output_dir={out}"]) == 0
    printed = capsys.readouterr().out
    assert "no validation ran (trainer.max_steps=3 ended the run before" in printed
    assert f"the test score is of the last weights ({out / 'checkpoints' / 'last.ckpt'})" in printed
    assert "genodiff: test NELBO" in printed  # was skipped without a word
    rows = read_metrics(out)
    assert not [r for r in rows if r.get("val/nelbo")]
    (test,) = [r for r in rows if r.get("test/nelbo")]
    assert float(test["test/nelbo"]) > 0


def test_a_resume_into_another_folder_does_not_say_no_validation_ever_ran(tmp_path, capsys):
    # The first run validated at steps 2 and 4 in its folder; the resume, into another one,
    # trains to step 5 without a validation: the best checkpoint is the first folder's.
    validated = [o for o in NO_VALIDATION if not o.startswith(("trainer.max_steps", "trainer.val"))]
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    args = ["train", DEMO, *validated, "trainer.val_check_interval=2"]
    assert cli.main([*args, "trainer.max_steps=4", f"output_dir={first}"]) == 0
    capsys.readouterr()
    last = first / "checkpoints" / "last.ckpt"
    again = [*args, "trainer.max_steps=5", f"ckpt_path={last}", f"output_dir={resumed}"]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        assert cli.main(again) == 0
    printed = capsys.readouterr().out
    # said in genodiff's words below, not in Lightning's ("The dirpath has changed ...")
    assert not [w for w in warned if "dirpath" in str(w.message)]
    assert "trainer.max_steps=5 ended the run before" not in printed  # validations did run
    assert f"no validation ran since the resume, and none before it is in {resumed}" in printed
    assert "genodiff: test NELBO" in printed


def test_the_weights_digest_is_a_crc_of_the_sampling_weights(run):
    model = load_model(run / "checkpoints" / "last.ckpt")
    state = {f"backbone.{k}": t for k, t in model.eval_backbone.state_dict().items()}
    assert model.provenance["weights_crc32"] == tensors_digest(state)
    assert re.fullmatch(r"[0-9a-f]{8}", model.provenance["weights_crc32"])
    assert model.provenance["global_step"] == 3
    raw = {f"backbone.{k}": t for k, t in model.backbone.state_dict().items()}
    assert tensors_digest(raw) != tensors_digest(state)  # EMA weights are not the raw ones


def test_sample_files_record_the_step_and_the_weights(run, tmp_path):
    last = run / "checkpoints" / "last.ckpt"
    trained = header_words(run / "samples.fa")  # drawn at the end of the run, in memory
    assert trained["checkpoint_step"] == "3" and trained["checkpoint"] == str(last)

    fasta, jsonl = tmp_path / "s.fa", tmp_path / "s.jsonl"
    for out in (fasta, jsonl):
        assert cli.main(["sample", "--checkpoint", str(last), *SAMPLE, "--out", str(out)]) == 0
    words = header_words(fasta)
    assert words["checkpoint_step"] == "3"
    assert words["weights_crc32"] == trained["weights_crc32"]  # the very same weights
    record = json.loads(jsonl.read_text().splitlines()[0])
    assert record["checkpoint_step"] == 3 and record["weights_crc32"] == words["weights_crc32"]

    # The export of the EMA weights samples with the same weights; the raw ones differ.
    for weights in ("ema", "raw"):
        folder = tmp_path / weights
        assert cli.main(["export", "--checkpoint", str(last), "--out", str(folder), "--weights",
                         weights]) == 0  # fmt: skip
        assert "weights_crc32" not in json.loads((folder / "genodiff.json").read_text())
        out = tmp_path / f"{weights}.fa"
        assert cli.main(["sample", "--checkpoint", str(folder), *SAMPLE, "--out", str(out)]) == 0
        exported = header_words(out)
        assert exported["checkpoint_step"] == "3"
        same = exported["weights_crc32"] == words["weights_crc32"]
        assert same == (weights == "ema"), weights


def test_the_new_words_leave_old_headers_and_labels_as_they_were(tmp_path):
    old = SamplingRun(checkpoint="c.ckpt", sampler="cached", steps=8, seed=5)
    assert old.describe() == (
        "checkpoint=c.ckpt sampler=cached steps=8 seed=5 draws=per-sequence-v1 "
        "temperature=1 top_p=1"
    )
    assert "checkpoint_step" not in old.provenance() and "weights_crc32" not in old.provenance()
    new = SamplingRun("c.ckpt", "cached", 8, 5, checkpoint_step=12, weights_crc32="0a1b2c3d")
    assert new.describe().startswith("checkpoint=c.ckpt checkpoint_step=12 weights_crc32=0a1b2c3d ")
    # A file with both kinds of header reads as before, labels included.
    path = tmp_path / "both.fa"
    path.write_text(
        f">a {old.describe()} label=human\nACGT\n>b {new.describe()} label=phage\nACGT\n"
    )
    assert read_sample_labels(path) == ["human", "phage"]
