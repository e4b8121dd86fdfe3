"""What ``genodiff train`` prints at the end of a run: its own report of the checkpoint it
tested, without Lightning's lines on reading that checkpoint (``genodiff/training/fit_run.py``,
``finish``)."""

from __future__ import annotations

import genodiff
from tests.test_cli import DEMO, TINY


def test_the_test_of_the_best_checkpoint_is_reported_once_by_genodiff(
    tmp_path, capsys, lightning_lines
):
    """Was: "Restoring states from the checkpoint path at X" and "Loaded model weights from the
    checkpoint at X" (Lightning's, which read as a resumed run) before genodiff's own "best
    val/nelbo ... at X" and the test score."""
    genodiff.train(DEMO, TINY, output_dir=tmp_path / "run")
    assert [line for line in lightning_lines if "from the checkpoint" in line] == []
    printed = capsys.readouterr().out.splitlines()
    best = [line for line in printed if line.startswith("genodiff: best val/nelbo ")]
    assert len(best) == 1 and str(tmp_path / "run" / "checkpoints" / "best-step") in best[0]
    assert any(line.startswith("genodiff: test NELBO ") for line in printed)
