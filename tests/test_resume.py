"""Checkpoints that are what they say: last.ckpt is the latest state, a non-finite held-out
NELBO never ranks as best, and a resumed run continues exactly as an uninterrupted one."""

import shutil
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.backbones.caduceus import Caduceus
from genodiff.checkpoints.io import read_checkpoint_file
from genodiff.training.module import GenerativeTrainingModule
from tests.test_cli import DEMO, TINY, read_metrics

BASE = [o for o in TINY if not o.startswith("trainer.max_steps")] + [
    "samples.num_samples=0",
    "evaluate_test=false",
]


def step_of(path: Path) -> int:
    return read_checkpoint_file(path)["global_step"]


def test_last_ckpt_is_the_latest_state_when_the_best_was_early(tmp_path, monkeypatch):
    original = GenerativeTrainingModule._log_heldout

    def worse_every_validation(self, stage):
        self.heldout_nelbo.update(torch.tensor(1000.0 * self.global_step))
        original(self, stage)

    monkeypatch.setattr(GenerativeTrainingModule, "_log_heldout", worse_every_validation)
    out = tmp_path / "run"
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=5"], output_dir=out)
    folder = out / "checkpoints"
    assert [p.name for p in folder.glob("best-step*.ckpt")] == ["best-step2.ckpt"]
    assert step_of(folder / "last.ckpt") == 5  # validated at 2 and 4, ended at 5

    args = ["train", DEMO, *BASE, "trainer.max_steps=7", f"output_dir={out}", "ckpt_path=last"]
    assert cli.main(args) == 0
    assert step_of(folder / "last.ckpt") == 7
    assert {int(r["step"]) for r in read_metrics(out, 1) if r.get("val/nelbo")} == {6}


def test_a_moved_run_folder_resumes_with_its_best_checkpoint(tmp_path, monkeypatch, capsys):
    original = GenerativeTrainingModule._log_heldout

    def worse_every_validation(self, stage):
        if stage == "val":
            self.heldout_nelbo.update(torch.tensor(1000.0 * self.global_step))
        original(self, stage)

    monkeypatch.setattr(GenerativeTrainingModule, "_log_heldout", worse_every_validation)
    first, moved = tmp_path / "first", tmp_path / "moved"
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=4"], output_dir=first)
    shutil.move(first, moved)
    capsys.readouterr()
    genodiff.train(DEMO, [*BASE, "trainer.max_steps=6", "ckpt_path=last"], output_dir=moved)
    folder = moved / "checkpoints"
    # validated at 2, 4 and 6, each worse: the best is still step 2's, in its new place
    assert sorted(p.name for p in folder.glob("best-step*.ckpt")) == ["best-step2.ckpt"]
    assert f"at {folder / 'best-step2.ckpt'}" in capsys.readouterr().out


def test_non_finite_validation_nelbo_stops_the_run_and_never_ranks_best(
    tmp_path, monkeypatch, capsys
):
    original = Caduceus.forward
    calls = {"eval": 0}
    per_validation = 2 * 4  # limit_val_batches x the demo's eval_t_samples

    def nan_from_the_second_validation(self, input_ids, sigma=None, inputs_embeds=None):
        logits = original(self, input_ids, sigma, inputs_embeds)
        if not torch.is_grad_enabled():
            calls["eval"] += 1
            if calls["eval"] > per_validation:
                return logits * float("nan")
        return logits

    monkeypatch.setattr(Caduceus, "forward", nan_from_the_second_validation)
    code = cli.main(["train", DEMO, *BASE, "trainer.max_steps=6", f"output_dir={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "the val NELBO is nan at step 4" in err and "ckpt_path=last" in err
    folder = tmp_path / "checkpoints"
    assert [p.name for p in folder.glob("best-step*.ckpt")] == ["best-step2.ckpt"]
    assert step_of(folder / "last.ckpt") == 2


EXACT = [
    *BASE,
    "trainer.max_steps=8",
    "trainer.limit_train_batches=3",  # epochs of 3 batches: the resume is in epoch 1
    "trainer.log_every_n_steps=1",
]


class StopTrainingError(ValueError):
    """Stands in for a crash after a checkpoint."""


@pytest.mark.process_level
def test_resumed_run_repeats_the_uninterrupted_run(tmp_path, monkeypatch):
    whole, split = tmp_path / "whole", tmp_path / "split"
    genodiff.train(DEMO, EXACT, output_dir=whole)

    original = GenerativeTrainingModule.training_step

    def stop_after_step_4(self, batch, batch_idx):
        if self.global_step == 4:
            raise StopTrainingError("stopped after the checkpoint at step 4")
        return original(self, batch, batch_idx)

    with monkeypatch.context() as patch:
        patch.setattr(GenerativeTrainingModule, "training_step", stop_after_step_4)
        with pytest.raises(StopTrainingError):  # a crash keeps its traceback
            cli.main(["train", DEMO, *EXACT, f"output_dir={split}"])
    assert step_of(split / "checkpoints" / "last.ckpt") == 4
    genodiff.train(DEMO, [*EXACT, "ckpt_path=last"], output_dir=split)

    assert_same_run(whole, split, resumed_at=4)
    a = read_checkpoint_file(whole / "checkpoints" / "last.ckpt")
    assert a["genodiff_run"]["tokens_seen"] == 8 * 4 * 128  # steps x data.batch_size x window


def closed_as_lightning_does(path: Path) -> None:
    """Rewrite the checkpoint ``path`` with the epoch closed, as Lightning counts an epoch that
    ``trainer.max_steps`` ended part-way and as genodiff wrote such a last.ckpt before."""
    checkpoint = read_checkpoint_file(path)
    progress = checkpoint["loops"]["fit_loop"]["epoch_progress"]
    for counts in (progress["current"], progress["total"]):
        counts["processed"] = counts["completed"] = counts["started"]
    checkpoint["epoch"] = progress["current"]["started"]
    torch.save(checkpoint, path)


@pytest.mark.process_level
@pytest.mark.parametrize("written_by", ["this version", "earlier versions"])
def test_a_run_ended_by_max_steps_inside_an_epoch_resumes_in_that_epoch(tmp_path, written_by):
    # Epochs of 3 batches, validation at steps 2, 4, 6, 8: the first run ends at step 5, the
    # second batch of epoch 1 (counted from 0), and its last.ckpt is written at the end. A
    # constant learning rate: the schedule's length is max_steps, 5 in the first run.
    constant = [*EXACT, "optim.warmup_fraction=0", "optim.min_lr_ratio=1"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    genodiff.train(DEMO, constant, output_dir=whole)
    ended_at_5 = [o for o in constant if not o.startswith("trainer.max_steps")]
    genodiff.train(DEMO, [*ended_at_5, "trainer.max_steps=5"], output_dir=split)
    last = split / "checkpoints" / "last.ckpt"
    checkpoint = read_checkpoint_file(last)
    assert checkpoint["global_step"] == 5 and checkpoint["epoch"] == 1  # steps 4-6: epoch 1
    if written_by == "earlier versions":
        closed_as_lightning_does(last)
    genodiff.train(DEMO, [*constant, "ckpt_path=last"], output_dir=split)
    # the batches of steps 6..8 are those of the uninterrupted run: the rest of epoch 1, then
    # epoch 2 (not a new epoch 2 at step 6, with epoch 1's third batch never trained)
    assert_same_run(whole, split, resumed_at=5)


def assert_same_run(whole: Path, split: Path, resumed_at: int) -> None:
    """The run in ``split``, stopped and resumed from step ``resumed_at``, logged (before and
    after the stop) and saved what the uninterrupted run in ``whole`` did: losses,
    validations, weights, EMA, optimizer, schedule."""

    def losses(rows: list[dict], key: str) -> dict[int, float]:
        return {int(r["step"]): float(r[key]) for r in rows if r.get(key)}

    expected, stopped, resumed = read_metrics(whole), read_metrics(split), read_metrics(split, 1)
    for key in ("train/nelbo", "val/nelbo"):
        # rows at the steps done: those after the checkpoint of step resumed_at
        after = {s: v for s, v in losses(expected, key).items() if s > resumed_at}
        assert after and losses(resumed, key) == pytest.approx(after, rel=1e-5, abs=1e-6)
        # and nothing is missing: every step logged before or after the stop
        both = losses(stopped, key) | losses(resumed, key)
        assert both == pytest.approx(losses(expected, key), rel=1e-5, abs=1e-6)
    a = read_checkpoint_file(whole / "checkpoints" / "last.ckpt")
    b = read_checkpoint_file(split / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"]
    for name, value in a["state_dict"].items():  # weights and EMA
        torch.testing.assert_close(b["state_dict"][name], value)
    (opt_a,), (opt_b,) = a["optimizer_states"], b["optimizer_states"]
    for key, state in opt_a["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(opt_b["state"][key][name], state[name])
    assert a["lr_schedulers"] == b["lr_schedulers"]
    # The token count continues across the resume: the same batches either way.
    assert a["genodiff_run"] == b["genodiff_run"]


@pytest.mark.parametrize(
    ("hook", "call", "overrides", "stopped_at"),
    [
        # the 3rd batch is the first half of step 2: the stop waits for the step's end
        ("training_step", 3, ["trainer.accumulate_grad_batches=2"], 2),
        # the 3rd validation batch is the first of step 4's validation: it is finished first
        ("validation_step", 3, [], 4),
    ],
    ids=["accumulating", "validating"],
)
def test_a_stop_in_the_middle_of_a_step_resumes_like_the_uninterrupted_run(
    tmp_path, monkeypatch, hook, call, overrides, stopped_at
):
    exact = [*BASE, "trainer.max_steps=6", "trainer.log_every_n_steps=1", *overrides]
    whole, split = tmp_path / "whole", tmp_path / "split"
    genodiff.train(DEMO, exact, output_dir=whole)

    original = getattr(GenerativeTrainingModule, hook)
    calls = []

    def sigterm_at_the_call(self, batch, batch_idx):
        calls.append(batch_idx)
        if len(calls) == call:  # what Lightning's SIGTERM handler does
            self.trainer._signal_connector.received_sigterm = True
        return original(self, batch, batch_idx)

    with monkeypatch.context() as patch:
        patch.setattr(GenerativeTrainingModule, hook, sigterm_at_the_call)
        with pytest.raises(SystemExit) as stopped:
            genodiff.train(DEMO, exact, output_dir=split)
    assert stopped.value.code == 143
    assert step_of(split / "checkpoints" / "last.ckpt") == stopped_at
    genodiff.train(DEMO, [*exact, "ckpt_path=last"], output_dir=split)
    assert_same_run(whole, split, resumed_at=stopped_at)


@pytest.mark.parametrize(
    ("hook", "when"),
    [("training_step", lambda module: module.global_step == 3), ("test_step", None)],
    ids=["in-the-last-step", "in-the-test"],
)
def test_a_stop_after_the_training_says_it_is_done_and_exits_143(
    tmp_path, monkeypatch, capsys, hook, when
):
    original = getattr(GenerativeTrainingModule, hook)

    def sigterm(self, batch, batch_idx):
        if when is None or when(self):  # in the 4th and last step, or in the test after it
            self.trainer._signal_connector.received_sigterm = True
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GenerativeTrainingModule, hook, sigterm)
    overrides = [o for o in BASE if o != "evaluate_test=false"]
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train", DEMO, *overrides, "trainer.max_steps=4", f"output_dir={tmp_path}"])
    assert stopped.value.code == 143
    assert step_of(tmp_path / "checkpoints" / "last.ckpt") == 4
    err = capsys.readouterr().err
    # a resume of step 4 with trainer.max_steps=4 is refused: what is left is said instead
    assert "stopped by SIGTERM at step 4" in err and "training is complete" in err
    assert "ckpt_path=last" not in err and "genodiff eval --checkpoint" in err
    assert not (tmp_path / "samples.fa").exists()


def test_a_crash_after_a_validation_in_the_middle_of_a_step_resumes_exactly(tmp_path, monkeypatch):
    # 2 batches a step, validation every 3 batches: at batches 3 and 9 (in the middle of steps
    # 2 and 5), 6 (the end of step 3) and 12 (the end); the crash comes in batch 11.
    exact = [
        *BASE,
        "trainer.max_steps=6",
        "trainer.accumulate_grad_batches=2",
        "trainer.val_check_interval=3",
        "trainer.log_every_n_steps=1",
    ]
    whole, split = tmp_path / "whole", tmp_path / "split"
    genodiff.train(DEMO, exact, output_dir=whole)

    original = GenerativeTrainingModule.training_step
    batches = []

    def crash_in_batch_11(self, batch, batch_idx):
        batches.append(batch_idx)
        if len(batches) == 11:
            raise StopTrainingError("a crash in batch 11")
        return original(self, batch, batch_idx)

    with monkeypatch.context() as patch:
        patch.setattr(GenerativeTrainingModule, "training_step", crash_in_batch_11)
        with pytest.raises(StopTrainingError):
            genodiff.train(DEMO, exact, output_dir=split)
    # batch 9's validation came half-way through step 5: last.ckpt is still step 3's
    assert step_of(split / "checkpoints" / "last.ckpt") == 3
    genodiff.train(DEMO, [*exact, "ckpt_path=last"], output_dir=split)
    assert_same_run(whole, split, resumed_at=3)


def test_a_resume_trains_with_its_own_optim_settings(tmp_path):
    constant = [*BASE, "optim.warmup_fraction=0", "optim.min_lr_ratio=1"]  # lr = optim.lr
    constant += ["trainer.log_every_n_steps=1"]
    genodiff.train(DEMO, [*constant, "trainer.max_steps=2"], output_dir=tmp_path)
    changed = [
        "optim.lr=1e-4",
        "optim.betas=[0.8,0.9]",
        "optim.eps=1e-6",
        "optim.weight_decay=0.01",
    ]
    genodiff.train(
        DEMO, [*constant, *changed, "trainer.max_steps=4", "ckpt_path=last"], output_dir=tmp_path
    )
    rows = read_metrics(tmp_path, 1)
    lrs = {int(r["step"]): float(r["lr-AdamW/pg1"]) for r in rows if r.get("lr-AdamW/pg1")}
    assert lrs and set(lrs.values()) == {1e-4}  # every resumed step, not the checkpoint's 3e-3
    state = read_checkpoint_file(tmp_path / "checkpoints" / "last.ckpt")
    decay, no_decay = state["optimizer_states"][0]["param_groups"]
    for group, weight_decay in ((decay, 0.01), (no_decay, 0.0)):
        assert group["lr"] == group["initial_lr"] == 1e-4
        assert tuple(group["betas"]) == (0.8, 0.9) and group["eps"] == 1e-6
        assert group["weight_decay"] == weight_decay
    assert state["lr_schedulers"][0]["base_lrs"] == [1e-4, 1e-4]
