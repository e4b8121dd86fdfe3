"""What Lightning prints that told a user nothing true: the progress bar's "Epoch 0/-2" in a run
counted in steps, "Checkpoint directory ... exists and is not empty" on every resume (the
folder is the run's own: genodiff refuses one holding another run's), and "your dataloader is
not resumable" (genodiff's train loader restores its position: docs/troubleshooting.md). And
what a run with stderr in a file shows instead of the bar: plain progress lines."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from types import SimpleNamespace

from lightning.pytorch.callbacks import RichProgressBar

from genodiff.training.trainer import StepRunProgressBar
from tests.test_cli import DEMO, TINY

QUICK = [o for o in TINY if not o.startswith(("trainer.max_steps", "trainer.enable_progress_bar"))]


def train(*overrides: str) -> subprocess.CompletedProcess:
    """``genodiff train DEMO`` in its own process, stderr a pipe, progress as by default."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("GENODIFF_PROGRESS", None)
    command = [sys.executable, "-m", "genodiff.cli", "train", DEMO, *QUICK, *overrides]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("genodiff train: steps ")]


def test_a_step_run_bar_shows_no_epoch_total():
    bar = StepRunProgressBar()
    bar._trainer = SimpleNamespace(max_epochs=-1)  # a run counted in steps
    assert RichProgressBar._get_train_description(bar, 0).startswith("Epoch 0/-2")  # Lightning's
    assert bar._get_train_description(0) == "Epoch 0"


def test_a_run_logging_to_a_file_shows_progress_lines_and_a_resume_no_warnings(tmp_path):
    out = f"output_dir={tmp_path / 'run'}"
    # Epochs of 3 batches: the run stops, and resumes, in the middle of epoch 1.
    short = ("samples.num_samples=0", "evaluate_test=false", "trainer.limit_train_batches=3")
    first = train("trainer.max_steps=4", *short, out)
    lines = progress_lines(first.stderr)
    # The first step and the last are drawn (the next line is 30 s away), none in between.
    assert [line.split(",")[0] for line in lines] == [
        "genodiff train: steps 1/4 (25%)",
        "genodiff train: steps 4/4 (100%)",
    ]
    # The first step's time (start-up, compiling) is no measure of the pace: no rate, no ETA.
    assert "ETA" not in lines[0] and "steps/s" not in lines[0] and "train/nelbo" in lines[0]
    assert "steps/s" in lines[1]
    assert "epoch 1" in lines[1]  # steps 4 is the first of epoch 1
    assert "Epoch 0" not in first.stderr  # no Rich bar drawn into the pipe
    # Each validation's result (every 2 steps), which a log file showed nowhere before
    validation = r"^genodiff train: validation after (\d+) steps, epoch (\d+): "
    validation += r"val/nelbo ([\d.]+), val/ppl ([\d.]+)$"
    validations = re.findall(validation, first.stderr, re.M)
    assert [(step, epoch) for step, epoch, *_ in validations] == [("2", "0"), ("4", "1")]
    for *_, nelbo, ppl in validations:  # the perplexity is exp(NELBO), to the 4 digits shown
        assert math.isclose(math.exp(float(nelbo)), float(ppl), rel_tol=2e-3)

    resumed = train("trainer.max_steps=6", *short, out, "ckpt_path=last")
    assert "resuming" in resumed.stderr
    assert [line.split(",")[0] for line in progress_lines(resumed.stderr)] == [
        "genodiff train: steps 5/6 (83%)",
        "genodiff train: steps 6/6 (100%)",
    ]
    shown = resumed.stdout + resumed.stderr
    assert "exists and is not empty" not in shown
    assert "not resumable" not in shown  # genodiff's loader restores the data position


def test_only_the_main_process_says_it_joins_the_process_group(monkeypatch):
    """Lightning's "Initializing distributed: GLOBAL_RANK: r, MEMBER: m/n" is printed by every
    process of a multi-process run (sample, eval, finetune --devices; train on several
    devices): kept to the main one, and nothing else of that logger is dropped."""
    import logging

    from lightning.fabric.utilities.distributed import log

    from genodiff.parallel import join_line_once

    heard: list[str] = []
    listener = logging.Handler()
    listener.emit = lambda record: heard.append(record.getMessage())
    monkeypatch.setattr(log, "filters", list(log.filters))  # the filter goes with the test
    monkeypatch.setattr(log, "handlers", [listener])
    join_line_once()
    join_line_once()  # once is enough: the filter is not doubled
    for rank in ("1", "0"):
        monkeypatch.setenv("LOCAL_RANK", rank)  # Lightning's launcher sets it in the others
        log.info(f"Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {int(rank) + 1}/2")
        log.info(f"another notice of process {rank}")
    assert heard == [
        "another notice of process 1",
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2",
        "another notice of process 0",
    ]
    assert len(log.filters) == 1
