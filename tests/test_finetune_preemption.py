"""`genodiff finetune` pre-empted: SIGTERM to the real process saves the fold, exits 143 with a
line saying how to resume, and the same command run again resumes it and finishes
(docs/troubleshooting.md, "Pre-emption")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tests" / "data" / "genomic_benchmarks"
# Two folds of many short epochs of a tiny model: a SIGTERM sent once fold 0 has saved its
# first epoch lands inside that fold's training.
CONFIG = """
name: preempted
output_dir: {out}
folds: 2
keep_checkpoints: false
model: {{name: caduceus, d_model: 16, n_layer: 1, vocab_size: 12, pad_vocab_size_multiple: 8}}
benchmark: {{root: {root}, tasks: [human_vs_phage], download: false, max_length: 64}}
sweep: {{lr: [1.0e-2], batch_size: [32]}}
early_stopping: {{patience: 100}}
trainer: {{accelerator: cpu, max_epochs: 12, enable_progress_bar: false, num_sanity_val_steps: 0}}
"""


def finetune(config: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GENODIFF_PROGRESS": "0"}
    command = [sys.executable, "-m", "genodiff.cli", "finetune", str(config)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


@pytest.mark.process_level
def test_sigterm_stops_a_fine_tuning_with_143_and_the_same_command_resumes_it(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "preempted.yaml"
    config.write_text(CONFIG.format(out=out, root=TASKS))
    fold0 = out / "runs" / "human_vs_phage" / "lr0.01_bs32" / "fold0"
    process = finetune(config)
    deadline = time.monotonic() + 300
    while not (fold0 / "checkpoints" / "last.ckpt").exists():  # the first epoch is saved
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]  # was 0: "success"
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith("genodiff finetune: stopped by SIGTERM at step ")
    assert f"saved {fold0 / 'checkpoints' / 'last.ckpt'}" in last_line
    assert last_line.endswith("Run the same command again to resume (finished runs are skipped)")
    assert not (fold0 / "result.json").exists()

    # Few batches an epoch: Lightning's warning of a logging interval longer than the epoch
    # is met at its source (the interval is cut to the epoch).
    assert "smaller than the logging interval" not in stderr

    process = finetune(config)  # the same command
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert f"resuming from {fold0 / 'checkpoints' / 'last.ckpt'}" in stdout
    assert "exists and is not empty" not in stderr  # the fold's own checkpoints
    results = [json.loads((fold0.parent / f"fold{k}" / "result.json").read_text()) for k in (0, 1)]
    assert [r["epochs"] for r in results] == [12, 12]  # fold 0 trained to the end after all
