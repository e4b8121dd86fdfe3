"""What ``genodiff train`` prints at the end of a run: its own report of the checkpoint it
tested, without Lightning's lines on reading that checkpoint (``genodiff/training/run.py``,
``finish``)."""

from __future__ import annotations

import logging

import pytest

import genodiff
from tests.test_cli import DEMO, TINY

LIGHTNING_LOGGER = "lightning.pytorch"


class LightningLines(logging.Handler):
    """The lines Lightning logs (``lightning.pytorch``'s logger and its children), kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lightning_lines():
    handler = LightningLines()
    logger = logging.getLogger(LIGHTNING_LOGGER)
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


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
