"""The fine-tuning CLI end to end on a toy task: outputs, resume, config errors, the table."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import warnings
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import genodiff
from genodiff import cli
from genodiff.backbones.build import CONFIG_ATTR
from genodiff.checkpoints import read_checkpoint_file
from genodiff.checkpoints.folders import save_pretrained
from genodiff.config_values import ConfigError
from genodiff.finetuning import load_finetune_config, protocol
from genodiff.finetuning.classifier import SequenceClassifier, build_backbone, load_backbone
from genodiff.finetuning.config import FinetuneOptimConfig, GivenModel
from genodiff.finetuning.module import ClassifierModule
from genodiff.finetuning.results import markdown_table, summarize
from genodiff.finetuning.trained import load_finetuned_classifier
from genodiff.tokenizers import DNATokenizer
from tests.test_bad_input_cli import files_in, one_line_error

ROOT = Path(__file__).resolve().parents[1]
TOY_MODEL = {"name": "caduceus", "d_model": 16, "n_layer": 1}  # the toy config's backbone


def test_run_writes_outputs_and_resume_redoes_only_unfinished_folds(toy, monkeypatch, capsys):
    config, out = toy
    genodiff.finetune(str(config), progress=False)
    for ext in ("csv", "json", "md", "png"):
        assert (out / f"results.{ext}").stat().st_size > 0
    first = json.loads((out / "results.json").read_text())
    table = (out / "results.md").read_text()
    task = first["tasks"]["toy"]
    assert task["classes"] == ["at", "gc"] and task["max_length"] == 24
    assert [r["fold"] for r in task["runs"]] == [0, 1]
    assert {r["n_val"] for r in task["runs"]} == {10}  # 20 train sequences, 2 folds
    assert "| toy | 2 | 24 | 0.003 | 8 | 2 |" in table
    # The log names each fold as its folder is named (runs/toy/lr0.003_bs8/fold0, fold1).
    assert "lr0.003_bs8/fold1 (of fold0..fold1): val acc" in capsys.readouterr().out

    # interrupt fold 1: its result is gone, a partial checkpoint folder is left behind
    fold1 = out / "runs" / "toy" / "lr0.003_bs8" / "fold1"
    (fold1 / "result.json").unlink()
    (fold1 / "checkpoints").mkdir()
    calls = []
    real_run_fold = protocol.run_fold

    def counting(cfg, task, run, *args, **kwargs):
        calls.append(run.fold)
        return real_run_fold(cfg, task, run, *args, **kwargs)

    monkeypatch.setattr(protocol, "run_fold", counting)
    genodiff.finetune(str(config), progress=False)
    assert calls == [1]
    assert "lr0.003_bs8/fold0 (of fold0..fold1): done before, skipped" in capsys.readouterr().out
    second = json.loads((out / "results.json").read_text())
    assert (out / "results.md").read_text() == table
    assert second["summary"] == first["summary"]
    timing = ("wall_s", "cpu_s")
    for a, b in zip(first["tasks"]["toy"]["runs"], second["tasks"]["toy"]["runs"], strict=True):
        assert {k: v for k, v in a.items() if k not in timing} == {
            k: v for k, v in b.items() if k not in timing
        }  # the re-trained fold reproduces the first run exactly (seed per fold)


def test_a_fold_stopped_mid_epoch_resumes_at_its_next_batch(toy, tmp_path, monkeypatch):
    config, _ = toy
    overrides = ["trainer.max_epochs=2"]  # 10 sequences a fold, batches of 8: 2 steps an epoch
    whole = genodiff.finetune(str(config), overrides, tmp_path / "whole", progress=False)

    def sigterm_after_step_3(self, outputs, batch, batch_idx):
        if self.global_step == 3:  # the first batch of epoch 1; Lightning's handler hears it
            skipped[0] = HOUR  # the fold's first part took an hour, as far as its clock knows
            os.kill(os.getpid(), signal.SIGTERM)

    # protocol's clock, an hour ahead once the first part is stopped
    HOUR, skipped = 3600.0, [0.0]
    late = type(
        "Time",
        (),
        {
            "perf_counter": staticmethod(lambda: time.perf_counter() + skipped[0]),
            "process_time": staticmethod(lambda: time.process_time() + skipped[0]),
        },
    )
    split = tmp_path / "split"
    with monkeypatch.context() as patch:
        patch.setattr(ClassifierModule, "on_train_batch_end", sigterm_after_step_3)
        patch.setattr(protocol, "time", late)
        with pytest.raises(SystemExit) as stopped:
            genodiff.finetune(str(config), overrides, split, progress=False)
    assert stopped.value.code == 143
    last = split / "runs" / "toy" / "lr0.003_bs8" / "fold0" / "checkpoints" / "last.ckpt"
    saved = read_checkpoint_file(last)  # weights_only, allow-listed
    assert saved["global_step"] == 3
    loader_states = saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert loader_states == [{"epoch": 1, "batches": 1}]  # the loader's place is saved

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = genodiff.finetune(str(config), overrides, split, progress=False)
    assert not [w for w in caught if "not resumable" in str(w.message)]
    # The resumed fold trained on the batches the uninterrupted one did: the same results.
    same = ("fold", "seed", "val_acc", "test_acc", "test_mcc", "test_f1", "test_loss", "epochs")
    for a, b in zip(whole.tasks["toy"]["runs"], resumed.tasks["toy"]["runs"], strict=True):
        assert {k: a[k] for k in same} == {k: b[k] for k in same}
    # Its times count the hour before the resume (they counted only the part after it), once:
    # the test's load of the selected checkpoint does not set the clock back to that one's.
    fold0 = resumed.tasks["toy"]["runs"][0]
    clock = saved["callbacks"]["FoldClock"]
    assert HOUR <= clock["wall_s"] < fold0["wall_s"] < HOUR + 600
    assert HOUR <= clock["cpu_s"] < fold0["cpu_s"] < HOUR + 600


def test_config_errors_are_clear(toy, capsys):
    config, out = toy
    assert cli.main(["finetune", str(config), "classifier.poolng=max"]) == 2
    err = capsys.readouterr().err
    assert "unknown config key 'classifier.poolng'" in err and "conjoin_eval" in err
    assert cli.main(["finetune", str(config), "benchmarks.root=x"]) == 2
    assert "Valid keys here:" in capsys.readouterr().err
    assert cli.main(["finetune", str(config), "classifier.pooling=avg"]) == 2
    assert "use one of mean, max, first, last" in capsys.readouterr().err
    assert cli.main(["finetune", str(config), "model.d_modle=3"]) == 2
    assert "model.d_modle" in capsys.readouterr().err
    assert cli.main(["finetune", str(config), "benchmark.tasks=[nope]"]) == 2
    assert "task 'nope' not found" in capsys.readouterr().err
    assert not out.exists()  # every refusal came before the first write
    fold = out / "runs" / "toy" / "lr0.001_bs8" / "fold0"
    fold.mkdir(parents=True)
    (fold / "result.json").write_text("{}")
    (out / "config.yaml").write_text("name: toy\nfolds: 3\n")  # results of another config
    assert cli.main(["finetune", str(config)]) == 2
    assert "holds results of a different config (" in capsys.readouterr().err

    # The saved config of a run on other processes, with a smaller batch: only the batch matters
    saved = OmegaConf.to_container(load_finetune_config(config), resolve=True)
    saved["sweep"]["batch_size"] = [4]
    saved["trainer"].update(devices=3, enable_progress_bar=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    assert cli.main(["finetune", str(config)]) == 2
    err = one_line_error(capsys, "finetune")
    assert "holds results of a different config (sweep.batch_size: [4] then, [8] now)" in err


def test_a_fold_that_ends_before_its_first_validation_is_refused_clearly(toy, capsys):
    config, out = toy  # 10 training sequences a fold, batches of 8: 2 steps an epoch
    assert cli.main(["finetune", str(config), "+trainer.max_steps=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    # was: Lightning's traceback "Early stopping conditioned on metric `val/acc` which is not
    # available", with the fold's checkpoint left to refuse the corrected config below
    assert err.startswith("genodiff finetune: error: [toy 1/1] lr0.003_bs8/fold0 (of fold0")
    assert "training ended at step 1, before the fold's first validation" in err
    assert not list(out.rglob("*.ckpt"))
    genodiff.finetune(str(config), progress=False)  # the same output_dir, corrected
    assert (out / "results.md").is_file()


def test_an_empty_test_class_folder_is_refused_before_any_write(toy, capsys):
    config, out = toy
    for file in (config.parent / "data" / "toy" / "test" / "gc").iterdir():
        file.unlink()
    assert cli.main(["finetune", str(config)]) == 2
    assert "toy/test/gc has no .txt files" in capsys.readouterr().err
    assert not out.exists()  # was: config.yaml written, then the error


def test_a_resume_from_other_weights_at_the_same_pretrained_path_is_refused(toy, capsys):
    config, out = toy
    tokenizer = DNATokenizer()
    folder = config.parent / "weights"

    def save_weights(seed: int) -> None:  # a new backbone's weights at one path
        torch.manual_seed(seed)
        backbone = build_backbone({"name": "caduceus", "d_model": 16, "n_layer": 1}, tokenizer)
        save_pretrained(backbone, folder, overwrite=True, tokenizer=tokenizer)

    save_weights(0)
    assert cli.main(["finetune", str(config), f"pretrained={folder}"]) == 0
    fold1 = out / "runs" / "toy" / "lr0.003_bs8" / "fold1" / "result.json"
    fold1.unlink()  # a fold left to do
    save_weights(1)  # the pretrained run went on training, say
    before = files_in(out)
    capsys.readouterr()
    assert cli.main(["finetune", str(config), f"pretrained={folder}"]) == 2
    assert "holds other weights" in one_line_error(capsys, "finetune")
    assert files_in(out) == before  # was: fold 1 fine-tuned from the new weights, mixed in
    save_weights(0)  # the weights the folds started from: the resume goes on
    assert cli.main(["finetune", str(config), f"pretrained={folder}"]) == 0
    assert fold1.is_file()


def test_a_damaged_run_record_is_one_line_naming_it_and_the_folder_to_delete(toy, capsys):
    """data.json and a fold's result.json, which fine-tuning wrote, edited since: the rerun
    says which file and what to delete (was: a JSONDecodeError or KeyError traceback) and
    changes nothing."""
    config, out = toy
    assert cli.main(["finetune", str(config)]) == 0
    runs = out / "runs" / "toy"
    damaged = {
        runs / "data.json": "{crc",  # not JSON
        runs / "lr0.003_bs8" / "fold0" / "result.json": '{"lr": 0.003}',  # no accuracies
        runs / "lr0.003_bs8" / "fold1" / "result.json": '{"lr": 0.003, "batch_size": 8, '
        '"val_acc": "high", "test_acc": 1, "test_mcc": 1, "test_f1": 1}',
    }
    for path, text in damaged.items():
        kept = path.read_bytes()
        path.write_text(text)
        before = files_in(out)
        capsys.readouterr()
        assert cli.main(["finetune", str(config)]) == 2
        err = one_line_error(capsys, "finetune")
        assert str(path) in err and "delete that folder" in err and str(path.parent) in err
        assert files_in(out) == before
        path.write_bytes(kept)
    assert cli.main(["finetune", str(config)]) == 0


def test_a_resume_after_a_tasks_files_changed_is_refused(toy, capsys):
    config, out = toy
    assert cli.main(["finetune", str(config)]) == 0
    (out / "runs" / "toy" / "lr0.003_bs8" / "fold1" / "result.json").unlink()  # a fold to do
    runs = files_in(out / "runs")
    (config.parent / "data" / "toy" / "train" / "at" / "3.txt").write_text("GATTACA")
    capsys.readouterr()
    assert cli.main(["finetune", str(config)]) == 2
    err = one_line_error(capsys, "finetune")
    assert err.startswith("genodiff finetune: error: task 'toy': its files changed since its")
    assert files_in(out / "runs") == runs  # was: fold 1 on other folds of other data, mixed in


def test_a_kept_fold_folder_loads_as_its_selected_checkpoint(toy):
    config, out = toy
    genodiff.finetune(str(config), ["keep_checkpoints=true"], progress=False)
    fold = out / "runs" / "toy" / "lr0.003_bs8" / "fold0"
    selected = json.loads((fold / "result.json").read_text())["checkpoint"]
    assert [p.name for p in (fold / "checkpoints").iterdir()] == [Path(selected).name]
    # was: last.ckpt kept beside it, which a folder reference loads: the last epoch's weights
    assert load_finetuned_classifier(fold / "checkpoints").source == selected


def test_selection_and_table_from_hand_made_records():
    def rec(lr, fold, val, test):
        return dict(lr=lr, batch_size=8, fold=fold, val_acc=val, test_acc=test,
                    test_mcc=0.5, test_f1=0.7)  # fmt: skip

    runs = [rec(1e-3, 0, 0.80, 0.95), rec(1e-3, 1, 0.82, 0.95),
            rec(2e-3, 0, 0.90, 0.80), rec(2e-3, 1, 0.88, 0.90)]  # fmt: skip
    assert protocol.select(runs) == (2e-3, 8)  # best mean validation accuracy, not test
    results = {
        "demo_human_or_worm": {
            "classes": ["a", "b"],
            "max_length": 200,
            "selected": {"lr": 2e-3, "batch_size": 8},
            "runs": runs,
        }
    }
    s = summarize(results)["demo_human_or_worm"]
    assert s["acc_mean"] == pytest.approx(0.85) and s["folds"] == 2
    assert "| 0.850 ± 0.100 | 0.500 | 0.700 | 0.970 |" in markdown_table(results, "m")


def test_demo_config_composes():
    from genodiff.finetuning import load_finetune_config

    root = Path(__file__).parent.parent
    cfg = load_finetune_config(root / "configs" / "genomic_benchmarks_demo.yaml")
    assert cfg.benchmark.tasks == ["human_vs_phage"] and cfg.model.d_model == 64
    assert Path(cfg.benchmark.root, "human_vs_phage", "train", "phage").is_dir()
    full = load_finetune_config(root / "configs" / "genomic_benchmarks.yaml", ["folds=3"])
    assert full.folds == 3 and full.benchmark.tasks is None and full.model.d_model == 118


def test_the_paper_config_trains_its_ph_model_on_both_strands_as_caduceus_does():
    # Caduceus's GenomicBenchmarkDataset reverse-complements a training sequence with
    # probability 1/2 whenever conjoin_test is on (its Ph runs), and conjoins at test time.
    # The shipped config trained the Ph model on the forward strand only (was rc_aug: false).
    cfg = load_finetune_config(ROOT / "configs" / "genomic_benchmarks.yaml")
    assert cfg.model.rcps is False and cfg.classifier.conjoin_eval
    assert cfg.classifier.rc_aug is True


def test_the_paper_config_optimizes_as_caduceus_does_and_the_demo_as_measured():
    # Caduceus's configs/experiment/hg38/genomic_benchmark.yaml: weight decay 0.1, warm-up over
    # 1% of the steps (warmup_t), cosine to lr_min = 0.1 lr, every epoch trained (10 in its
    # runs). Was: no weight decay, 10% warm-up, a floor of 0, stops after 3 flat epochs.
    paper = load_finetune_config(ROOT / "configs" / "genomic_benchmarks.yaml")
    assert (paper.optim.weight_decay, paper.optim.warmup_fraction) == (0.1, 0.01)
    assert paper.optim.min_lr_ratio == 0.1
    assert paper.early_stopping.patience >= paper.trainer.max_epochs == 10
    # the demo keeps the settings its documented numbers were measured with
    demo = load_finetune_config(ROOT / "configs" / "genomic_benchmarks_demo.yaml")
    assert (demo.optim.weight_decay, demo.optim.warmup_fraction, demo.optim.min_lr_ratio) == (
        0.0,
        0.1,
        0.0,
    )
    assert demo.early_stopping.patience == 3 and demo.classifier.rc_aug is False


@pytest.mark.parametrize(
    "override, message",
    [
        ("folds=1", "folds: 1 is out of range; set a value at least 2"),
        ("sweep.lr=[1e-3,0]", "sweep.lr: 0 is out of range; set a value greater than 0"),
        ("sweep.lr=-1e-3", "sweep.lr: -0.001 is out of range; set a value greater than 0"),
        ("sweep.batch_size=[8,0]", "sweep.batch_size: 0 is out of range; set a value at least 1"),
        ("sweep.batch_size=eight", "sweep.batch_size: expected an integer or a list of"),
        ("optim.warmup_fraction=1.5", "optim.warmup_fraction: 1.5 is out of range"),
        ("early_stopping.patience=-1", "early_stopping.patience: -1 is out of range"),
        ("benchmark.max_length=0", "benchmark.max_length: 0 is out of range"),
        ("trainer.max_epochs=-2", "trainer.max_epochs: -2 is out of range"),
        ("model.n_layer=0", "model.n_layer: 0 is out of range"),
        # no validation: each fold's checkpoint is chosen on it (was: a traceback after training)
        ("+trainer.limit_val_batches=0", "trainer.limit_val_batches=0 runs no validation"),
        ("+trainer.check_val_every_n_epoch=11", "trainer.check_val_every_n_epoch=11 validates"),
    ],
)
def test_finetune_config_values_are_range_checked(override, message):
    from genodiff.finetuning import load_finetune_config

    root = Path(__file__).parent.parent
    with pytest.raises(ConfigError) as err:
        load_finetune_config(root / "configs" / "genomic_benchmarks.yaml", [override])
    assert message in str(err.value)


def test_a_single_sweep_value_is_a_one_point_sweep():
    from genodiff.finetuning import load_finetune_config

    root = Path(__file__).parent.parent
    cfg = load_finetune_config(
        root / "configs" / "genomic_benchmarks.yaml", ["sweep.lr=2e-3", "sweep.batch_size=16"]
    )
    assert list(cfg.sweep.lr) == [2e-3] and list(cfg.sweep.batch_size) == [16]


class StopFoldError(ValueError):
    """Stands in for a crash in the middle of a fold."""


def test_an_interrupted_fold_resumes_from_its_last_epoch_and_ends_the_same(
    toy, tmp_path, monkeypatch, capsys
):
    config, out = toy
    three_epochs = ["trainer.max_epochs=3", "folds=2", "early_stopping.patience=5"]
    genodiff.finetune(str(config), three_epochs, progress=False)
    whole = json.loads((out / "results.json").read_text())["tasks"]["toy"]["runs"]

    split = tmp_path / "split"
    again = [*three_epochs, f"output_dir={split}"]
    original = ClassifierModule.training_step

    def crash_in_epoch_2_of_fold_1(self, batch, batch_idx):
        if self.current_epoch == 2 and self.trainer.default_root_dir.endswith("fold1"):
            raise StopFoldError("killed in the middle of fold 1, epoch 2")
        return original(self, batch, batch_idx)

    with monkeypatch.context() as patch:
        patch.setattr(ClassifierModule, "training_step", crash_in_epoch_2_of_fold_1)
        with pytest.raises(StopFoldError):  # a crash keeps its traceback
            cli.main(["finetune", str(config), *again])
    fold1 = split / "runs" / "toy" / "lr0.003_bs8" / "fold1"
    assert not (fold1 / "result.json").exists() and (fold1 / "checkpoints" / "last.ckpt").is_file()
    capsys.readouterr()
    genodiff.finetune(str(config), again, progress=False)
    assert f"resuming from {fold1 / 'checkpoints' / 'last.ckpt'}" in capsys.readouterr().out
    resumed = json.loads((split / "results.json").read_text())["tasks"]["toy"]["runs"]
    varying = ("wall_s", "cpu_s", "checkpoint")
    for a, b in zip(whole, resumed, strict=True):
        assert {k: v for k, v in a.items() if k not in varying} == {
            k: v for k, v in b.items() if k not in varying
        }


@pytest.mark.parametrize("patience", [5, 1], ids=["trained-to-the-end", "stopped-early"])
def test_a_sigterm_in_a_folds_test_exits_143_and_the_same_command_finishes_it(
    toy, tmp_path, monkeypatch, capsys, patience
):
    # Lightning's SIGTERM exception is a SystemExit of status 0: a scheduler took the stopped
    # fine-tuning for a finished one, with fold 1 unscored. A fold that early stopping ended
    # is not trained further when it resumes.
    config, out = toy
    # two test batches (Lightning stops a test after a batch that is not its last)
    epochs = ["trainer.max_epochs=6", "folds=2", f"early_stopping.patience={patience}"]
    epochs += ["early_stopping.min_delta=0.2", "sweep.batch_size=[4]"]
    genodiff.finetune(str(config), epochs, progress=False)
    whole = json.loads((out / "results.json").read_text())["tasks"]["toy"]["runs"]
    assert [run["epochs"] < 5 for run in whole] == [patience == 1] * 2  # stopped early, or not

    split = tmp_path / "split"
    again = [*epochs, f"output_dir={split}"]
    original = ClassifierModule.test_step

    def sigterm_in_the_test_of_fold_1(self, batch, batch_idx):
        if self.trainer.default_root_dir.endswith("fold1"):  # what Lightning's handler does
            self.trainer._signal_connector.received_sigterm = True
        return original(self, batch, batch_idx)

    with monkeypatch.context() as patch:
        patch.setattr(ClassifierModule, "test_step", sigterm_in_the_test_of_fold_1)
        with pytest.raises(SystemExit) as stopped:
            cli.main(["finetune", str(config), *again])
    assert stopped.value.code == 143
    assert "genodiff finetune: stopped by SIGTERM" in capsys.readouterr().err
    fold1 = split / "runs" / "toy" / "lr0.003_bs4" / "fold1"
    assert not (fold1 / "result.json").exists() and (fold1 / "checkpoints" / "last.ckpt").is_file()
    genodiff.finetune(str(config), again, progress=False)
    resumed = json.loads((split / "results.json").read_text())["tasks"]["toy"]["runs"]
    varying = ("wall_s", "cpu_s", "checkpoint")
    for a, b in zip(whole, resumed, strict=True):
        assert {k: v for k, v in a.items() if k not in varying} == {
            k: v for k, v in b.items() if k not in varying
        }


def test_balanced_class_weights_are_n_over_classes_times_count():
    # 6 training labels: class 0 four times, class 1 once, class 2 once -> 6 / (3 * n_c)
    weights = protocol.class_weights("balanced", torch.tensor([0, 0, 1, 0, 2, 0]), 3)
    assert weights.tolist() == pytest.approx([6 / 12, 6 / 3, 6 / 3])
    assert protocol.class_weights("none", torch.tensor([0, 1]), 2) is None


def test_class_weights_weight_the_training_cross_entropy_only():
    tokenizer = DNATokenizer()
    backbone = build_backbone({"name": "caduceus", "d_model": 16, "n_layer": 1}, tokenizer)
    classifier = SequenceClassifier(backbone, 2, tokenizer)
    weights = torch.tensor([0.25, 4.0])
    module = ClassifierModule(classifier, 1e-3, FinetuneOptimConfig(), False, {}, weights)
    ids = torch.tensor(
        [DNATokenizer().encode(seq) for seq in ("ACGTAC", "GGCATT", "TTTACG", "CAGATT")]
    )
    labels = torch.tensor([0, 1, 1, 0])
    log_p = classifier(ids).log_softmax(-1)  # (4, 2)
    picked = -log_p[torch.arange(4), labels]  # (4,)
    by_hand = (weights[labels] * picked).sum() / weights[labels].sum()
    assert module.training_step((ids, labels), 0).item() == pytest.approx(by_hand.item(), rel=1e-5)


def test_unknown_class_weights_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="classifier.class_weights='inverse'"):
        load_finetune_config(
            ROOT / "configs" / "genomic_benchmarks_demo.yaml", ["classifier.class_weights=inverse"]
        )


def test_a_pretrained_model_must_read_the_tasks_ids():
    """The tasks are encoded with the DNA tokenizer: a pretrained model whose tokenizer stores
    another state (other ids) is refused before anything is written; the same one passes."""
    from genodiff.tokenizers import DNATokenizer

    protocol.check_encoding(DNATokenizer(), "run.ckpt")
    protocol.check_encoding(None, "folder")  # a folder without tokenizer.json: nothing to check

    class ShiftedIds(DNATokenizer):
        def to_state(self) -> dict:
            return {"shift": 1}

    with pytest.raises(ConfigError, match="reads with the tokenizer"):
        protocol.check_encoding(ShiftedIds(), "other.ckpt")


def test_the_docs_name_every_setting_a_resume_may_change():
    """docs/genomic_benchmarks.md lists the settings a resumed fine-tuning may change without
    being refused: every one that FREE_ON_RESUME exempts."""
    page = " ".join((ROOT / "docs" / "genomic_benchmarks.md").read_text().split())
    exempt = [
        f"{section}.{key}" for section, keys in protocol.FREE_ON_RESUME.items() for key in keys
    ]
    assert [key for key in exempt if f"`{key}`" not in page] == []


class StartedError(Exception):
    """Raised in place of a fold's training, once its start is done."""


def fold_start(toy, monkeypatch, overrides: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """The classification head's initial weights and torch's global random state when fold 0
    of the toy task is handed to the Trainer."""
    config, _ = toy
    seen = []

    def recording_fit(trainer, module, *args, **kwargs):
        seen.append((module.classifier.score.weight.detach().clone(), torch.get_rng_state()))
        raise StartedError

    monkeypatch.setattr(protocol, "fit", recording_fit)
    with pytest.raises(StartedError):
        genodiff.finetune(str(config), overrides, config.parent / "out_start", progress=False)
    return seen[0]


def test_a_fold_from_pretrained_weights_draws_what_the_fold_from_scratch_draws(toy, monkeypatch):
    """From scratch against pretrained is a paired comparison: fold k's head and its RC flips
    come from the same random state either way (the new backbone's draws move nothing on)."""
    config, _ = toy
    torch.manual_seed(3)
    backbone = build_backbone(dict(TOY_MODEL), DNATokenizer())
    folder = save_pretrained(backbone, config.parent / "weights", tokenizer=DNATokenizer())
    head, state = fold_start(toy, monkeypatch, [])
    shutil.rmtree(config.parent / "out_start")
    paired_head, paired_state = fold_start(toy, monkeypatch, [f"pretrained={folder}"])
    assert torch.equal(paired_head, head)  # was: drawn after the new backbone's weights
    assert torch.equal(paired_state, state)


def test_loading_the_backbone_to_fine_tune_leaves_the_global_random_state(tmp_path):
    torch.manual_seed(3)
    backbone = build_backbone(dict(TOY_MODEL), DNATokenizer())
    folder = save_pretrained(backbone, tmp_path / "weights", tokenizer=DNATokenizer())
    torch.manual_seed(9)
    without_a_load = torch.rand(3)
    torch.manual_seed(9)
    load_backbone(str(folder))
    assert torch.equal(torch.rand(3), without_a_load)  # was: advanced by the module's build


def test_a_model_given_beside_pretrained_weights_must_describe_their_backbone(toy, capsys):
    """The folds fine-tune the pretrained backbone; a model override that names another one
    would be ignored, and the run's config.yaml would record a model it never trained."""
    config, out = toy
    torch.manual_seed(3)
    backbone = build_backbone(dict(TOY_MODEL), DNATokenizer())
    folder = save_pretrained(backbone, config.parent / "weights", tokenizer=DNATokenizer())
    pretrained = f"pretrained={folder}"
    assert cli.main(["finetune", str(config), pretrained, "model.d_model=32"]) == 2
    err = one_line_error(capsys, "finetune")
    assert "d_model: 32 given, 16 pretrained" in err and "leave model out" in err
    assert not out.exists()  # was: fine-tuned the 16-wide backbone, config.yaml saying 32
    # Settings the pretrained backbone has too (rms_norm: Caduceus' default) are accepted.
    assert cli.main(["finetune", str(config), pretrained, "model.rms_norm=true"]) == 0
    saved = OmegaConf.load(out / "config.yaml").model
    assert (saved.d_model, saved.n_layer, saved.rms_norm) == (16, 1, True)


def model_from_the_defaults_list(config: Path) -> None:
    """The toy config with its model picked in its defaults list (caduceus_tiny: 64 wide, 2
    layers), the model of a from-scratch run, where its own model section was."""
    lines = config.read_text().splitlines()
    kept = [line for line in lines if not line.startswith("model:")]
    assert len(kept) == len(lines) - 1
    config.write_text("\n".join(["defaults:", "  - model: caduceus_tiny", "  - _self_", *kept]))


def test_a_model_section_of_the_config_file_beside_pretrained_weights_must_describe_them(
    toy, capsys
):
    """A model section written in the config file, beside pretrained= given on the command
    line or in the file, describes the model the user wants; one of another backbone than the
    weights' would go unused (was: the folds fine-tuned the weights' backbone, nothing said)."""
    config, out = toy  # its model section: 16 wide, 1 layer
    torch.manual_seed(3)
    backbone = build_backbone({**TOY_MODEL, "d_model": 24}, DNATokenizer())
    folder = save_pretrained(backbone, config.parent / "weights", tokenizer=DNATokenizer())
    assert cli.main(["finetune", str(config), f"pretrained={folder}"]) == 2
    err = one_line_error(capsys, "finetune")
    assert f"the model section of {config} and pretrained={folder}" in err
    assert "(d_model: 16 given, 24 pretrained)" in err
    assert "remove the model section from toy.yaml" in err and "or drop pretrained" in err
    assert not out.exists()
    # pretrained in the file itself: the same refusal
    config.write_text(config.read_text() + f"pretrained: {folder}\n")
    assert cli.main(["finetune", str(config)]) == 2
    assert "(d_model: 16 given, 24 pretrained)" in one_line_error(capsys, "finetune")
    assert not out.exists()


def test_a_config_without_a_model_runs_from_pretrained_weights_alone(toy, capsys):
    config, out = toy
    lines = config.read_text().splitlines()
    config.write_text("\n".join(line for line in lines if not line.startswith("model:")))
    assert cli.main(["finetune", str(config)]) == 2
    err = one_line_error(capsys, "finetune")
    assert "'model.name' is missing: say which backbone to use" in err
    torch.manual_seed(3)
    backbone = build_backbone(dict(TOY_MODEL), DNATokenizer())
    folder = save_pretrained(backbone, config.parent / "weights", tokenizer=DNATokenizer())
    # was: 'model' must be a mapping, got None
    assert cli.main(["finetune", str(config), f"pretrained={folder}"]) == 0
    assert OmegaConf.load(out / "config.yaml").model.d_model == 16


def test_the_model_a_defaults_list_picks_is_not_given_beside_pretrained_weights(tmp_path):
    """The shipped configs pick their model in the defaults list (the model a from-scratch run
    trains): with pretrained weights it is not compared with theirs, so
    `genodiff finetune configs/genomic_benchmarks_demo.yaml pretrained=mdlm-chrx` runs; a
    model section written in a file, or an override, is."""
    demo, paper = ROOT / "configs" / "genomic_benchmarks_demo.yaml", "genomic_benchmarks"
    assert GivenModel.of(demo, ["pretrained=mdlm-chrx"]) is None
    assert GivenModel.of(paper, ["pretrained=mdlm-chrx"]) is None
    given = GivenModel.of(demo, ["pretrained=mdlm-chrx", "model.d_model=32"])
    assert (given.settings, given.written) == ({"d_model": 32}, {})
    mine = tmp_path / "mine.yaml"  # the demo with a model section of its own
    mine.write_text("defaults:\n  - genomic_benchmarks_demo\n  - _self_\nmodel:\n  n_layer: 3\n")
    given = GivenModel.of(mine, ["model.d_model=32"])
    assert (given.settings, given.written, given.file) == (
        {"n_layer": 3, "d_model": 32},
        {"n_layer": 3},
        mine,
    )


def test_the_demo_config_fine_tunes_pretrained_weights_of_another_backbone(monkeypatch, tmp_path):
    """configs/genomic_benchmarks_demo.yaml (caduceus_tiny, 64 wide, from its defaults list)
    with pretrained weights of a 16-wide backbone reaches its first fold."""
    torch.manual_seed(3)
    backbone = build_backbone(dict(TOY_MODEL), DNATokenizer())
    folder = save_pretrained(backbone, tmp_path / "weights", tokenizer=DNATokenizer())
    started = []

    def recording_fit(trainer, module, *args, **kwargs):
        started.append(getattr(module.classifier.backbone, CONFIG_ATTR)["d_model"])
        raise StartedError

    monkeypatch.setattr(protocol, "fit", recording_fit)
    demo = ROOT / "configs" / "genomic_benchmarks_demo.yaml"
    with pytest.raises(StartedError):
        genodiff.finetune(demo, [f"pretrained={folder}"], tmp_path / "out", progress=False)
    assert started == [16]


def test_the_config_of_a_pretrained_run_records_the_backbone_it_fine_tuned(toy):
    config, out = toy
    model_from_the_defaults_list(config)
    torch.manual_seed(3)
    backbone = build_backbone({**TOY_MODEL, "d_model": 24}, DNATokenizer())
    folder = save_pretrained(backbone, config.parent / "weights", tokenizer=DNATokenizer())
    genodiff.finetune(str(config), [f"pretrained={folder}"], progress=False)
    saved = OmegaConf.load(out / "config.yaml").model
    assert (saved.name, saved.d_model, saved.n_layer) == ("caduceus", 24, 1)  # was: 64 (unused)
    # The same command again: the model the config's defaults list picks (64 wide) is not
    # used, so it is not compared with the recorded one either; the weights' CRC-32 is.
    (out / "runs" / "toy" / "lr0.003_bs8" / "fold1" / "result.json").unlink()
    assert genodiff.finetune(str(config), [f"pretrained={folder}"], progress=False) is not None


def test_a_mistyped_pretrained_model_name_is_said_with_the_name_meant(toy, capsys):
    config, out = toy
    assert cli.main(["finetune", str(config), "pretrained=mdlm-chrz"]) == 2
    err = one_line_error(capsys, "finetune")
    assert err.startswith("genodiff finetune: error: pretrained=mdlm-chrz: not found")
    assert "did you mean mdlm-chrx?" in err  # was: the name taken as a path, nothing meant
    assert not out.exists()


def test_a_run_naming_other_tasks_says_which_folds_its_tables_leave_out(toy, capsys):
    config, out = toy
    shutil.copytree(config.parent / "data" / "toy", config.parent / "data" / "toy2")
    genodiff.finetune(str(config), progress=False)
    capsys.readouterr()
    second = genodiff.finetune(str(config), ["benchmark.tasks=[toy2]"], progress=False)
    assert list(second.tasks) == ["toy2"]  # results.* are this run's tables, as documented
    said = capsys.readouterr().out
    # was: results.md without toy, written over the one with it, and nothing said
    assert (
        f"results.* hold the tasks this run names (toy2); {out / 'runs'} holds folds of toy" in said
    )
    genodiff.finetune(str(config), ["benchmark.tasks=[toy,toy2]"], progress=False)
    assert "holds folds of" not in capsys.readouterr().out
