"""Shared fixtures: the contract fakes of the GPU libraries (``tests/fakes``)."""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Iterator

import lightning.pytorch  # noqa: F401 (see below)
import pytest

from genodiff.ops import upstream
from tests import fakes

# Lightning (and the transformers and torchmetrics it imports) give their loggers a
# StreamHandler of the sys.stderr of the moment they are first imported. Imported here, that
# is pytest's session-long capture; first imported inside a test it was that test's capsys
# stream, closed after it, and every later Lightning line of the process ("GPU available: ...")
# became a "--- Logging error ---" traceback in the next test's captured stderr (order-dependent:
# tests/test_save_convention.py then a test reading one error line from a training command).


@pytest.fixture
def upstream_fakes(monkeypatch) -> Counter:
    """Install the fakes as ``mamba_ssm`` and ``causal_conv1d`` for one test (shadowing real
    ones); yields the per-function call counts. CPU tensors still take the exact path unless
    the test enters ``genodiff.ops.upstream_kernels_on_cpu()``."""
    for name, module in fakes.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    fakes.calls.clear()
    upstream.importable.cache_clear()  # forget what an earlier test found importable
    yield fakes.calls
    upstream.importable.cache_clear()


TOY_FINETUNE_CONFIG = """
name: toy
output_dir: {out}
folds: 2
keep_checkpoints: false
model: {{name: caduceus, d_model: 16, n_layer: 1, vocab_size: 12, pad_vocab_size_multiple: 8}}
benchmark: {{root: {root}, tasks: [toy], download: false}}
classifier: {{pooling: mean, conjoin_eval: true}}
sweep: {{lr: [3.0e-3], batch_size: [8]}}
trainer: {{accelerator: cpu, max_epochs: 1, enable_progress_bar: false, log_every_n_steps: 1,
          num_sanity_val_steps: 0}}
"""


@pytest.fixture()
def toy(tmp_path):  # fine-tuning (tests/test_finetune_protocol.py, tests/test_ddp.py)
    """A 2-class task (A/T-rich vs G/C-rich, lengths 16-24) and a config file for it."""
    for split, n in (("train", 10), ("test", 4)):
        for name, letters in (("at", "AAT"), ("gc", "GCC")):
            folder = tmp_path / "data" / "toy" / split / name
            folder.mkdir(parents=True)
            for i in range(n):
                (folder / f"{i}.txt").write_text((letters * 8)[: 16 + i % 9])
    config = tmp_path / "toy.yaml"
    out = tmp_path / "out"
    config.write_text(TOY_FINETUNE_CONFIG.format(out=out, root=tmp_path / "data"))
    return config, out


class LightningLines(logging.Handler):
    """The lines Lightning logs (``lightning.pytorch``'s logger and its children), kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lightning_lines() -> Iterator[list[str]]:
    """The lines Lightning logs during the test (train, finetune: tests/test_*_output.py)."""
    handler = LightningLines()
    logger = logging.getLogger("lightning.pytorch")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)
