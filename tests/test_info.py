"""``genodiff info``: what a training checkpoint, an exported folder or any checkpoint folder
holds; and an exported folder samples exactly like the checkpoint it came from."""

import hashlib
import json
import shutil

import pytest
import torch
from Bio import SeqIO

import genodiff
from genodiff import cli
from genodiff.backbones import build
from genodiff.checkpoints import inspect_checkpoint, save_pretrained
from genodiff.data.base import files_digest
from genodiff.data.build import build_datamodule
from genodiff.data.datamodule import DEMO_FASTA
from genodiff.model import GenerativeModel
from genodiff.training.module import GenerativeTrainingModule
from tests.checkpoint_files import save_as_trained
from tests.test_cli import DEMO
from tests.test_hub import write_hub_cache

STEPS, BATCH, WINDOW, ACCUMULATE = 2, 4, 128, 2
PLAID = {
    "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
    "objective": {"name": "plaid", "d_model": 16, "schedule_hidden": 16},
}
TOKENS = STEPS * ACCUMULATE * BATCH * WINDOW  # every micro-batch of the run


def expected_digest(*paths) -> str:
    """sha256 over the files' own sha256 digests, computed here from the raw bytes."""
    per_file = b"".join(hashlib.sha256(p.read_bytes()).digest() for p in paths)
    return "sha256:" + hashlib.sha256(per_file).hexdigest()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    overrides = [
        "model=caduceus_tiny",
        f"data.max_length={WINDOW}",
        f"data.batch_size={BATCH}",
        f"trainer.max_steps={STEPS}",
        f"trainer.accumulate_grad_batches={ACCUMULATE}",
        f"trainer.val_check_interval={STEPS}",
        "trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false",
        "evaluate_test=false",
        "samples.num_samples=0",
        f"output_dir={out}",
    ]
    genodiff.train(DEMO, overrides)
    ckpt = out / "checkpoints" / "last.ckpt"
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(out / "exported")]) == 0
    return out


def info_json(path, capsys) -> dict:
    capsys.readouterr()
    assert cli.main(["info", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def trained_parameters(run) -> int:
    module = GenerativeTrainingModule.load_from_checkpoint(run / "checkpoints" / "last.ckpt")
    return sum(p.numel() for p in module.backbone.parameters())


def test_info_of_a_training_checkpoint(run, capsys):
    info = info_json(run / "checkpoints" / "last.ckpt", capsys)
    assert info["holds"].startswith("training checkpoint")
    assert info["objective"] == "mdlm" and info["backbone"].startswith("caduceus (")
    assert info["parameters"] == trained_parameters(run)
    assert info["step"] == STEPS
    assert info["tokens_seen"] == TOKENS and info["tokens_seen_counted"]
    assert info["data"] == f"fasta, fasta={DEMO_FASTA}"
    assert info["data_digest"] == expected_digest(DEMO_FASTA)
    assert info["tokenizer"] == "dna (dna, 12 ids)"
    assert info["config"]["trainer"]["max_steps"] == STEPS

    assert cli.main(["info", str(run / "checkpoints" / "last.ckpt")]) == 0
    text = capsys.readouterr().out
    assert (
        "objective:   mdlm" in text
        and f"data digest: {expected_digest(DEMO_FASTA)} (of the files' bytes)" in text
    )
    assert f"tokens seen: {TOKENS:,} (counted during training" in text
    assert "config:\n" in text and "    max_steps: 2" in text


def test_info_of_an_exported_folder_keeps_the_run(run, capsys):
    info = info_json(run / "exported", capsys)
    assert info["holds"].endswith("exported from last.ckpt, ema weights")
    assert info["objective"] == "mdlm" and info["step"] == STEPS
    assert info["parameters"] == trained_parameters(run)
    assert info["config"]["model"]["name"] == "caduceus"
    assert info["tokens_seen"] == TOKENS and info["data_digest"] == expected_digest(DEMO_FASTA)


def test_info_estimates_tokens_of_a_checkpoint_without_the_record(run, tmp_path, capsys):
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    del checkpoint["genodiff_run"]  # as written before tokens were counted
    torch.save(checkpoint, tmp_path / "old.ckpt")
    info = info_json(tmp_path / "old.ckpt", capsys)
    assert info["tokens_seen"] == TOKENS and not info["tokens_seen_counted"]
    assert info["data_digest"] is None
    assert cli.main(["info", str(tmp_path / "old.ckpt")]) == 0
    text = capsys.readouterr().out
    assert "data digest: not recorded" in text
    assert (
        f"tokens seen: ~{TOKENS:,} (2 steps x batch 4 x 128-token windows x 2 accumulated" in text
    )


def test_resuming_on_changed_data_warns_and_records_the_new_digest(run, tmp_path):
    fasta = tmp_path / "genome.fa"
    fasta.write_text(">chrA\n" + "ACGT" * 300 + "\n")
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    model = GenerativeTrainingModule(checkpoint["hyper_parameters"]["config"])
    model.record_data(build_datamodule({"name": "fasta", "fasta": str(fasta)}))
    assert model.data_digest == expected_digest(fasta)
    with pytest.warns(UserWarning, match="data files differ"):
        model.on_load_checkpoint(checkpoint)
    assert model.data_digest == expected_digest(fasta)
    assert model.tokens_seen == TOKENS


def test_data_digest_follows_bytes_not_names(tmp_path):
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_bytes(b">x\nACGT\n")
    shutil.copy(a, b)
    assert files_digest([a]) == files_digest([b]) == expected_digest(a)
    b.write_bytes(b">x\nACGA\n")
    assert files_digest([b]) != files_digest([a])
    assert files_digest([a, b]) != files_digest([b, a]) == expected_digest(b, a)


def test_info_of_a_backbone_only_folder(tmp_path, capsys):
    # The paper's Caduceus size: 470,702 parameters (docs/architecture.md §6.2).
    folder = save_pretrained(build("caduceus", d_model=118, n_layer=4, vocab_size=12), tmp_path)
    info = info_json(folder, capsys)
    assert info["parameters"] == 470_702
    assert info["holds"] == "checkpoint folder (caduceus layout), backbone only"
    assert info["objective"] is None and info["step"] is None and info["tokens_seen"] is None
    assert info["config"]["model_type"] == "caduceus"
    assert cli.main(["info", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "objective:   not recorded" in text and "tokenizer:   none stored" in text


def test_info_takes_a_hub_id(run, tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache"
    write_hub_cache(cache, "test-org/demo-run", {"main": run / "exported"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    info = inspect_checkpoint("test-org/demo-run")
    assert info.source == "test-org/demo-run" and info.path.startswith(str(cache))
    assert info.step == STEPS and info.objective == "mdlm"


def test_an_exported_folder_samples_like_its_checkpoint(run, tmp_path):
    def sample(checkpoint, out):
        args = ["sample", "--checkpoint", str(checkpoint), "--num-samples", "3", "--steps", "8"]
        assert cli.main([*args, "--length", "48", "--seed", "5", "--out", str(out)]) == 0
        return [str(r.seq) for r in SeqIO.parse(out, "fasta")]

    from_ckpt = sample(run / "checkpoints" / "last.ckpt", tmp_path / "a.fa")
    assert sample(run / "exported", tmp_path / "b.fa") == from_ckpt


def test_info_of_a_finetuned_and_of_a_guidance_classifier(tmp_path, capsys):
    """Every kind genodiff writes is described for what it is, read through the one loader
    (a run folder is taken too)."""
    from tests.test_open_checkpoint import finetuned_checkpoint, guidance_checkpoint

    finetuned = tmp_path / "ft" / "checkpoints" / "last.ckpt"
    finetuned_checkpoint(finetuned)
    info = inspect_checkpoint(tmp_path / "ft")
    assert info.holds == "classifier fine-tuned on t (genodiff finetune)"
    assert info.classes == ["a", "b"] and info.backbone.startswith("caduceus")
    guidance_checkpoint(tmp_path / "g.ckpt")
    assert cli.main(["info", str(tmp_path / "g.ckpt")]) == 0
    assert "guidance classifier of" in capsys.readouterr().out


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_info_counts_the_parameters_of_the_whole_model_a_checkpoint_holds(tmp_path, capsys):
    """A classifier's head and Plaid's objective have parameters of their own, beside the
    backbone's. Was: the backbone's alone, under the row named "parameters"."""
    from tests.test_open_checkpoint import finetuned_checkpoint, guidance_checkpoint

    finetuned = finetuned_checkpoint(tmp_path / "ft.ckpt")
    guidance = guidance_checkpoint(tmp_path / "g.ckpt")
    for path, classifier in ((tmp_path / "ft.ckpt", finetuned), (tmp_path / "g.ckpt", guidance)):
        backbone, head = count(classifier.backbone), count(classifier.score)
        assert head > 0 and count(classifier) == backbone + head  # nothing else learned
        info = info_json(path, capsys)
        assert info["parameters"] == count(classifier)
        assert info["parameter_parts"] == {"backbone": backbone, "head": head}
        assert cli.main(["info", str(path)]) == 0
        row = f"parameters:  {count(classifier):,} (backbone {backbone:,}, head {head:,})"
        assert row in capsys.readouterr().out.splitlines()

    plaid = GenerativeModel({**PLAID, "ema": {"decay": 0.5}})  # the average is no parameter
    info = info_json(save_as_trained(tmp_path / "plaid.ckpt", plaid), capsys)
    parts = {"backbone": count(plaid.backbone), "objective": count(plaid.objective)}
    assert parts["objective"] > 0 and info["parameter_parts"] == parts
    assert info["parameters"] == count(plaid.backbone) + count(plaid.objective)


def shown_rows(text: str) -> list[str]:
    """The names of the rows ``genodiff info`` printed, up to its config."""
    rows = text.split("\nconfig:\n")[0].splitlines()
    return [row.split(":")[0] for row in rows]


def test_info_of_a_classifier_shows_only_the_rows_a_classifier_has(tmp_path, capsys):
    """A classifier has no objective, tokens seen or training data of a generative run: those
    rows said "not recorded" for every classifier."""
    from tests.test_open_checkpoint import finetuned_checkpoint, guidance_checkpoint

    finetuned_checkpoint(tmp_path / "ft" / "checkpoints" / "last.ckpt")
    guidance_checkpoint(tmp_path / "g.ckpt")
    for path in (tmp_path / "ft", tmp_path / "g.ckpt"):
        assert cli.main(["info", str(path)]) == 0
        rows = ["source", "holds", "backbone", "parameters", "step", "classes", "tokenizer"]
        assert shown_rows(capsys.readouterr().out) == rows


def written_before_epochs_were_reopened(path, step: int, epochs_begun: int, position: dict):
    """A training checkpoint of a run that ``trainer.max_steps`` ended at ``step``, as genodiff
    wrote one before ``checkpoints.epochs``: the ``epochs_begun`` epochs all closed, as
    Lightning counts them (and its ``epoch`` the next one's number), and the train loader's
    ``position`` as ``genodiff.data.loaders.ResumableLoader`` records it."""
    closed = dict.fromkeys(("ready", "started", "processed", "completed"), epochs_begun)
    loops = {
        "fit_loop": {
            "state_dict": {"combined_loader": [position]},
            "epoch_progress": {"total": dict(closed), "current": dict(closed)},
        }
    }
    model = GenerativeModel({"model": PLAID["model"], "objective": {"name": "mdlm"}})
    return save_as_trained(path, model, global_step=step, epoch=epochs_begun, loops=loops)


# Epochs of 3 batches, one a step: the run ended at step 5 (epoch 1's second batch: the loader
# is at batch 2 of epoch 1) or at step 6 (the end of epoch 1: the loader at the start of 2).
@pytest.mark.parametrize(
    ("step", "position"), [(5, {"epoch": 1, "batches": 2}), (6, {"epoch": 2, "batches": 0})]
)
def test_info_of_an_earlier_versions_checkpoint_gives_the_epoch_a_resume_goes_on_in(
    tmp_path, capsys, step, position
):
    """Either way the latest batch is of epoch 1 (counted from 0), as the progress lines said,
    and after step 5 a resume goes on in it. Was: the epoch such a checkpoint recorded,
    Lightning's 2, in info and in an export of it."""
    old = tmp_path / "old.ckpt"
    written_before_epochs_were_reopened(old, step, epochs_begun=2, position=position)
    latest_batch_epoch = (step - 1) // 3
    info = info_json(old, capsys)
    assert (info["step"], info["epoch"]) == (step, latest_batch_epoch)
    assert cli.main(["info", str(old)]) == 0
    assert f"step:        {step} (epoch {latest_batch_epoch})" in capsys.readouterr().out
    assert cli.main(["export", "--checkpoint", str(old), "--out", str(tmp_path / "out")]) == 0
    assert info_json(tmp_path / "out", capsys)["epoch"] == latest_batch_epoch


COUNTS = {"ready": 2, "started": 2, "processed": 2, "completed": 2}


@pytest.mark.parametrize(
    ("loops", "epoch"),
    [
        ("not loops", 7),
        ({"fit_loop": {"epoch_progress": {"current": None, "total": COUNTS}}}, 7),
        ({"fit_loop": {"epoch_progress": {"current": {**COUNTS, "started": "2"}}}}, 7),
        ({"fit_loop": {"epoch_progress": {"current": COUNTS, "total": COUNTS}}}, 1),
        (
            {
                "fit_loop": {
                    "epoch_progress": {"current": COUNTS, "total": COUNTS},
                    "state_dict": {"combined_loader": 5},
                }
            },
            1,
        ),
    ],
)
def test_a_checkpoint_with_loop_state_out_of_lightnings_shape_still_reads(
    tmp_path, capsys, loops, epoch
):
    """Reading the epoch as a resume would (``checkpoints.epochs``) walks Lightning's loop
    state, which no record check covers: a file whose state is not in that shape (edited, or
    from elsewhere) keeps the epoch it records, and Lightning's counts where only the loader's
    position is missing."""
    model = GenerativeModel({"model": PLAID["model"], "objective": {"name": "mdlm"}})
    path = save_as_trained(tmp_path / "m.ckpt", model, global_step=5, epoch=7, loops=loops)
    assert info_json(path, capsys)["epoch"] == epoch
