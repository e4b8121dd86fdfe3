"""What Lightning prints that told a user nothing true: the progress bar's "Epoch 0/-2" in a run
counted in steps, and "Checkpoint directory ... exists and is not empty" on every resume (the
folder is the run's own: genodiff refuses one holding another run's)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.test_cli import DEMO, TINY

QUICK = [o for o in TINY if not o.startswith(("trainer.max_steps", "trainer.enable_progress_bar"))]


def train(*overrides: str) -> subprocess.CompletedProcess:
    """``genodiff train DEMO`` in its own process, the progress bar forced on."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GENODIFF_PROGRESS": "1"}
    command = [sys.executable, "-m", "genodiff.cli", "train", DEMO, *QUICK, *overrides]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_run_counted_in_steps_shows_no_epoch_total_and_a_resume_no_folder_warning(tmp_path):
    out = f"output_dir={tmp_path / 'run'}"
    first = train("trainer.max_steps=2", "samples.num_samples=0", "evaluate_test=false", out)
    shown = first.stdout + first.stderr
    assert "Epoch 0" in shown  # the bar was drawn ...
    assert "/-2" not in shown  # ... without Lightning's "Epoch 0/-2" (max_epochs is -1)
    resumed = train("trainer.max_steps=4", "samples.num_samples=0", "evaluate_test=false", out,
                    "ckpt_path=last")  # fmt: skip
    assert "resuming" in resumed.stderr
    assert "exists and is not empty" not in resumed.stdout + resumed.stderr
