"""Every check of ``genodiff train`` and ``genodiff finetune`` comes before the first write: a
refused run leaves no folder behind and the corrected retry runs; a resume that would train
nothing, or train another model than its checkpoint's, is refused and the run's record
(config.yaml, checkpoints) is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from genodiff import cli
from tests.test_bad_input_cli import GB_DEMO, files_in, one_line_error
from tests.test_cli import DEMO, TINY

QUICK = [*TINY, "samples.num_samples=0", "evaluate_test=false"]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    assert cli.main(["train", DEMO, *QUICK, f"output_dir={out}"]) == 0  # 4 steps
    return out


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.max_length=10000000"], "has no windows"),
        (["data.split_fractions=[0.5,0.6,0.1]"], "split_fractions"),
        (["trainer.max_steps=0"], "trainer.max_steps=0 trains nothing"),
        (["trainer.max_epochs=0"], "trainer.max_epochs=0 trains nothing"),
    ],
)
def test_a_refused_run_writes_nothing(tmp_path, capsys, overrides, message):
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *QUICK, *overrides, f"output_dir={out}"]) == 2
    assert message in one_line_error(capsys, "train")
    assert not out.exists()


def test_a_samples_sampler_that_needs_settings_the_section_lacks_is_refused_first(tmp_path, capsys):
    # semi-ar needs a block and a stride, which the samples section has no keys for: the
    # run's samples and the trained model's generation config could never draw. Was: refused
    # after training, as "(--block, --stride)", options train does not have.
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *QUICK, "samples.sampler=semi-ar", f"output_dir={out}"]) == 2
    line = one_line_error(capsys, "train")
    assert line.startswith("genodiff train: error: samples.sampler: 'semi-ar' needs block and ")
    assert "choose one of ancestral, cached, first-hitting for the run's samples" in line
    assert "--" not in line
    assert not out.exists()


def test_the_corrected_retry_of_a_refused_run_trains(tmp_path, capsys):
    out = tmp_path / "run"
    bad = ["data.split_fractions=[0.5,0.6,0.1]", f"output_dir={out}"]
    assert cli.main(["train", DEMO, *QUICK, *bad]) == 2
    assert cli.main(["train", DEMO, *QUICK, f"output_dir={out}"]) == 0
    assert (out / "checkpoints" / "last.ckpt").is_file()


def test_a_folder_from_a_run_that_never_trained_holds_no_run(tmp_path):
    # What a run stopped before its first step leaves: its config, tokenizer and empty logs.
    out = tmp_path / "run"
    (out / "logs" / "version_0").mkdir(parents=True)
    (out / "logs" / "version_0" / "hparams.yaml").write_text("{}\n")
    (out / "config.yaml").write_text("name: demo\n")
    (out / "tokenizer.json").write_text("{}\n")
    (out / "checkpoints").mkdir()
    from genodiff.checkpoints import run_folder

    run_folder.check_output_dir(out, None)  # no error: nothing to lose
    (out / "logs" / "version_0" / "metrics.csv").write_text("step,train/loss\n0,2.5\n")
    with pytest.raises(ValueError, match="already holds a run"):
        run_folder.check_output_dir(out, None)


def test_an_experiment_file_named_config_yaml_in_output_dir_is_not_replaced(tmp_path, capsys):
    # An experiment kept in its own folder, trained into that folder: the run would write its
    # resolved config.yaml over the experiment file (its defaults list and comments).
    experiment = tmp_path / "config.yaml"
    text = "# my experiment\ndefaults:\n  - demo\n  - _self_\nname: mine\n"
    experiment.write_text(text)
    assert cli.main(["train", str(experiment), *QUICK, f"output_dir={tmp_path}"]) == 2
    assert "holds the experiment file" in one_line_error(capsys, "train")
    assert experiment.read_text() == text
    assert not (tmp_path / "checkpoints").exists()


# ------------------------------------------------------------- resume


def resume(out: Path, *overrides: str) -> int:
    return cli.main(["train", DEMO, *QUICK, f"output_dir={out}", "ckpt_path=last", *overrides])


@pytest.mark.parametrize("max_steps", [4, 2])
def test_a_resume_past_max_steps_is_refused(trained_run, capsys, max_steps):
    before = files_in(trained_run)
    assert resume(trained_run, f"trainer.max_steps={max_steps}") == 2
    err = one_line_error(capsys, "train")
    assert "already trained to step 4" in err and "raise trainer.max_steps" in err
    assert files_in(trained_run) == before


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["model.d_model=32"], ["model.d_model: 64 -> 32"]),  # was a size-mismatch traceback
        (["data.max_length=64"], ["data.max_length: 128 -> 64"]),
        (["model.n_layer=3", "data.max_length=256"], ["model.n_layer: 2 -> 3", "256"]),
        (["objective=sedd"], ["objective.name: mdlm -> sedd"]),
    ],
)
def test_a_resume_of_another_model_or_window_is_refused(trained_run, capsys, overrides, named):
    before = files_in(trained_run)
    assert resume(trained_run, "trainer.max_steps=6", *overrides) == 2
    err = one_line_error(capsys, "train")
    assert all(text in err for text in named), err
    # what a resume keeps, as it is checked (was "its model, objective, tokenizer and ...")
    assert "keeps its model, tokenizer, objective.name and data.max_length" in err
    assert files_in(trained_run) == before


def test_a_resume_records_what_it_changed(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *QUICK, "trainer.max_steps=2", f"output_dir={out}"]) == 0
    capsys.readouterr()
    assert resume(out, "trainer.max_steps=4", "optim.lr=0.001") == 0
    err = capsys.readouterr().err
    assert "trainer.max_steps: 2 -> 4" in err and "optim.lr: 0.003 -> 0.001" in err
    config = (out / "config.yaml").read_text()
    assert "max_steps: 4" in config and "lr: 0.001" in config


# ------------------------------------------------------------- finetune


FINETUNE_QUICK = [
    "folds=2",
    "trainer.max_epochs=1",
    "sweep.batch_size=[32]",
    "trainer.enable_progress_bar=false",
    "model.d_model=16",
    "model.n_layer=1",
    "keep_checkpoints=false",
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # 250 training sequences per class; the classes are human and phage
        (["folds=400"], "task 'human_vs_phage': class 'human' has only 250 training sequences"),
        (["benchmark.tasks=[no_such_task]"], "task 'no_such_task' not found"),
        (["model.d_model=0"], "model.d_model"),
        (["trainer.max_epochs=0"], "trainer.max_epochs=0 trains nothing"),
        # Two values that name one folder: the second point would read the first's results.
        (["sweep.lr=[3e-3,0.003]"], "gives the sweep point lr0.003_bs32 twice"),
        (["sweep.lr=[1e-3,1.0000001e-3]"], "gives the sweep point lr0.001_bs32 twice"),
        (["benchmark.tasks=[]"], "benchmark.tasks is empty"),  # was: all 8 tasks
        (["benchmark.tasks=[human_vs_phage,human_vs_phage]"], "names human_vs_phage more than"),
        (["benchmark.tasks=[../demo]"], "'../demo' is not a task's folder name"),  # was: read
        # folds=2: fold 1 trains with seed + 1, which seed_everything refused after fold 0
        (["seed=4294967295"], "set seed at most 4294967294"),
    ],
)
def test_a_refused_finetune_writes_nothing(tmp_path, capsys, overrides, message):
    out = tmp_path / "gb"
    assert cli.main(["finetune", GB_DEMO, *FINETUNE_QUICK, *overrides, f"output_dir={out}"]) == 2
    assert message in one_line_error(capsys, "finetune")
    assert not out.exists()


def test_a_finetune_folder_without_results_takes_another_config(tmp_path):
    out = tmp_path / "gb"
    out.mkdir()
    (out / "config.yaml").write_text("folds: 3\n")  # a run that failed before its first fold
    assert cli.main(["finetune", GB_DEMO, *FINETUNE_QUICK, f"output_dir={out}"]) == 0
    assert (out / "results.json").is_file()


def test_a_finetune_leaves_another_runs_folder_as_it_was(trained_run, tmp_path, capsys):
    before = files_in(trained_run)
    assert cli.main(["finetune", GB_DEMO, *FINETUNE_QUICK, f"output_dir={trained_run}"]) == 2
    assert "holds config.yaml, not written by a fine-tuning" in one_line_error(capsys, "finetune")
    assert files_in(trained_run) == before  # its config.yaml was overwritten

    file = tmp_path / "notes.txt"
    file.write_text("mine")
    assert cli.main(["finetune", GB_DEMO, *FINETUNE_QUICK, f"output_dir={file}"]) == 2
    assert "is a file; choose a folder" in one_line_error(capsys, "finetune")  # was: [Errno 17]

    # fold results with no config.yaml to tell which config made them
    out = tmp_path / "gb"
    fold = out / "runs" / "human_vs_phage" / "lr0.003_bs32" / "fold0"
    fold.mkdir(parents=True)
    (fold / "result.json").write_text("{}")
    assert cli.main(["finetune", GB_DEMO, *FINETUNE_QUICK, f"output_dir={out}"]) == 2
    assert "holds fold results in runs/, not written" in one_line_error(capsys, "finetune")
    assert files_in(out) == {"runs/human_vs_phage/lr0.003_bs32/fold0/result.json": b"{}"}


def stored_at_step_3(tmp_path, recorded: dict):
    """A generator checkpoint of a run with config ``recorded``, at step 3, as
    ``run_folder.check_resume`` reads it."""
    from genodiff.checkpoints.load import GENERATOR, StoredCheckpoint
    from genodiff.tokenizers import DNATokenizer

    content = {"hyper_parameters": {"config": recorded}, "global_step": 3}
    return StoredCheckpoint(GENERATOR, tmp_path / "last.ckpt", content, DNATokenizer(), recorded)


def test_a_refused_resume_gives_the_values_the_run_was_trained_with(tmp_path):
    # The common case: a small run (model.d_model=64 ...) resumed with ckpt_path=last and
    # without its overrides. Was: "leave these overrides out", though none was given.
    from genodiff.checkpoints import run_folder

    recorded = {
        "model": {"name": "caduceus", "d_model": 64, "fused_add_norm": True, "layer": None},
        "data": {"max_length": 128},
        "trainer": {"max_steps": 3},
    }
    checkpoint = stored_at_step_3(tmp_path, recorded)
    current = {
        "model": {"name": "caduceus", "d_model": 118, "fused_add_norm": False, "layer": 2},
        "data": {"max_length": 1024},
        "trainer": {"max_steps": 6},
    }
    with pytest.raises(ValueError) as refused:
        run_folder.check_resume(current, checkpoint)
    trained = "data.max_length=128 model.d_model=64 model.fused_add_norm=true model.layer=null"
    assert f"resume with the values it was trained with ({trained}), or start" in str(refused.value)
    assert "leave these overrides out" not in str(refused.value)

    # resumed with another model group: model.name=caduceus laid over model=mamba would keep
    # mamba's other settings, so the group itself is what to give again
    current["model"] = {**recorded["model"], "name": "mamba"}
    with pytest.raises(ValueError) as refused:
        run_folder.check_resume(current, checkpoint)
    trained = "data.max_length=128 a model group of name caduceus (model=GROUP)"
    assert f"resume with the values it was trained with ({trained}), or start" in str(refused.value)
    assert "model.name=" not in str(refused.value).split("trained with (")[-1]


def test_check_resume_names_a_changed_tokenizer_and_keeps_old_keys_out(tmp_path):
    from genodiff.checkpoints import run_folder

    recorded = {
        "tokenizer": {"name": "trained", "vocab_size": 200},
        "model": {"name": "dit", "hidden_dim": 32, "retired_option": 1},
        "trainer": {"max_steps": 3},
        "optim": {"lr": 0.001},
    }
    checkpoint = stored_at_step_3(tmp_path, recorded)
    current = {
        "tokenizer": {"name": "trained", "vocab_size": 300},
        "model": {"name": "dit", "hidden_dim": 32, "new_option": 2},  # keys of one side only
        "trainer": {"max_steps": 6},
        "optim": {"lr": 0.001},
    }
    with pytest.raises(ValueError, match=r"\(tokenizer.vocab_size: 200 -> 300\)"):
        run_folder.check_resume(current, checkpoint)
    current["tokenizer"]["vocab_size"] = 200
    assert run_folder.check_resume(current, checkpoint) == ["trainer.max_steps: 3 -> 6"]
    current["trainer"]["max_steps"] = -1  # no limit
    assert run_folder.check_resume(current, checkpoint) == ["trainer.max_steps: 3 -> -1"]
