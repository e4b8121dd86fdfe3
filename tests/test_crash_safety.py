"""Crash safety of `genodiff train`: kill -9 at random moments (some in the middle of a
checkpoint write) never leaves an unloadable last.ckpt and every resume reaches the planned
step; SIGTERM saves a checkpoint and exits.

The training processes are forked from a forkserver that has imported genodiff once, so each
start costs a fork rather than a Python start-up.
"""

import io
import multiprocessing
import os
import random
import shutil
import signal
import time
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

from genodiff.checkpoints.io import loadable_checkpoint
from genodiff.checkpoints.run_folder import CHECKPOINT_FOLDER
from genodiff.training.session import fit
from tests.test_cli import DEMO, TINY

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(
    ["genodiff.cli", "genodiff.training.module", "tests.test_crash_safety"]
)
BASE = [o for o in TINY if not o.startswith("trainer.max_steps")] + [
    "samples.num_samples=0",
    "evaluate_test=false",
]
PLANNED = 16
KILL_ARGS = [
    "train",
    DEMO,
    *BASE,
    f"trainer.max_steps={PLANNED}",
    "trainer.limit_train_batches=5",  # epochs of 5 batches: kills land across epochs
]


def slow_save(obj, handle) -> None:
    """torch.save that stops half-way for a moment: a window for the kill to land in."""
    buffer = io.BytesIO()
    REAL_SAVE(obj, buffer)
    data = buffer.getvalue()
    handle.write(data[: len(data) // 2])
    handle.flush()
    time.sleep(0.3)
    handle.write(data[len(data) // 2 :])


REAL_SAVE = torch.save


def train_child(args: list[str], slow_writes: bool, started_step=None) -> None:
    """Runs `genodiff train ARGS` in the child; ``started_step`` (an Event) is set once three
    optimizer steps are done."""
    from genodiff import cli
    from genodiff.training.module import GenerativeTrainingModule

    if slow_writes:
        torch.save = slow_save
    if started_step is not None:
        original = GenerativeTrainingModule.on_train_batch_end

        def signal_progress(self, outputs, batch, batch_idx):
            original(self, outputs, batch, batch_idx)
            if self.global_step >= 3:
                started_step.set()

        GenerativeTrainingModule.on_train_batch_end = signal_progress
    try:
        code = cli.main(args)
    except SystemExit as stop:
        code = stop.code
    os._exit(code)


def step_of(path: Path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["global_step"]


def kill_when_writing(child, folder: Path, nth: int) -> bool:
    """SIGKILL ``child`` while it writes its ``nth`` checkpoint; whether it was mid-write."""
    seen: set[str] = set()
    while child.is_alive():
        seen |= {p.name for p in folder.glob(".*.tmp")}
        if len(seen) >= nth:
            os.kill(child.pid, signal.SIGKILL)
            child.join()
            return bool(list(folder.glob(".*.tmp")))  # the kill left the half-written file
        time.sleep(0.005)
    return False


@pytest.mark.process_level
def test_kill_9_at_random_moments_never_loses_the_run(tmp_path):
    rng = random.Random(0)
    out = tmp_path / "run"
    folder = out / CHECKPOINT_FOLDER

    def args() -> list[str]:
        resume = folder.is_dir() and any(folder.glob("*.ckpt"))
        return [*KILL_ARGS, f"output_dir={out}", *(["ckpt_path=last"] if resume else [])]

    kills = mid_write = rounds = 0
    # Until 10 kills, 3 of them mid-write (a fast machine may finish a run before its kill).
    while (kills < 10 or mid_write < 3) and rounds < 40:
        if not (folder.is_dir() and any(folder.glob("*.ckpt"))):  # nothing to resume
            shutil.rmtree(out, ignore_errors=True)
        timed_to_write = rounds % 2 == 1
        child = CONTEXT.Process(target=train_child, args=(args(), timed_to_write))
        child.start()
        if timed_to_write:
            mid_write += kill_when_writing(child, folder, nth=rng.randint(1, 3))
        else:
            child.join(rng.uniform(0.5, 4.0))
            if child.is_alive():
                os.kill(child.pid, signal.SIGKILL)
                child.join()
        assert child.exitcode in (0, -signal.SIGKILL)  # a resume never fails
        kills += child.exitcode == -signal.SIGKILL
        if (folder / "last.ckpt").exists():
            assert loadable_checkpoint(folder / "last.ckpt") is not None
        if child.exitcode == 0:
            assert step_of(folder / "last.ckpt") == PLANNED
        # The run finished (or was killed after its final checkpoint, which a resume would
        # refuse: max_steps is reached): start a new one to keep killing.
        if (folder / "last.ckpt").exists() and step_of(folder / "last.ckpt") == PLANNED:
            shutil.rmtree(out)
        rounds += 1
    assert kills >= 10 and mid_write >= 3

    child = CONTEXT.Process(target=train_child, args=(args(), False))
    child.start()
    child.join()
    assert child.exitcode == 0
    assert step_of(folder / "last.ckpt") == PLANNED


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_or_a_ctrl_c_saves_a_checkpoint_and_exits(tmp_path, stop):
    out = tmp_path / "run"
    args = ["train", DEMO, *BASE, "trainer.max_steps=1000", "trainer.val_check_interval=1000"]
    started = CONTEXT.Event()
    child = CONTEXT.Process(target=train_child, args=([*args, f"output_dir={out}"], False, started))
    child.start()
    assert started.wait(300)
    os.kill(child.pid, stop)
    child.join(120)
    assert child.exitcode == 128 + stop
    folder = out / CHECKPOINT_FOLDER
    assert not list(folder.glob("best-step*.ckpt"))  # no validation ran: the signal saved it
    assert 3 <= step_of(folder / "last.ckpt") < 1000


class InterruptedAtStep(BoringModel):
    """Lightning's demo model; its third training step is interrupted by a Ctrl-C that does
    not wait for the step's end (a second Ctrl-C)."""

    def training_step(self, batch, batch_idx):
        if batch_idx == 2:
            raise KeyboardInterrupt
        return super().training_step(batch, batch_idx)


def test_a_ctrl_c_that_interrupts_at_once_exits_130_with_one_line(tmp_path, capsys):
    trainer = L.Trainer(
        default_root_dir=tmp_path, max_steps=10, accelerator="cpu", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        fit(trainer, InterruptedAtStep(), "train", "Resume it with ckpt_path=last")
    assert stop.value.code == 128 + signal.SIGINT  # was 1, Lightning's
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        last == "genodiff train: stopped by Ctrl-C at once at step 2. Resume it with ckpt_path=last"
    )
