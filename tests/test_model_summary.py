"""The table of modules and parameters that ``genodiff train`` prints as training starts
(``genodiff/training/model_summary.py``)."""

from __future__ import annotations

import logging
import re

import lightning as L
from torch import nn

from genodiff.config import load_config
from genodiff.model import EMA
from genodiff.training.model_summary import ModelSummaryWithoutFlops, log
from genodiff.training.module import GenerativeTrainingModule
from genodiff.training.trainer import build_trainer

LIGHTNING_LOGGER = "lightning.pytorch"


class TwoLayers(L.LightningModule):
    """3 -> 4 trained (3 * 4 weights + 4 biases = 16 parameters), 4 -> 2 frozen (8 + 2 = 10)."""

    def __init__(self) -> None:
        super().__init__()
        self.trained = nn.Linear(3, 4)
        self.frozen = nn.Linear(4, 2).requires_grad_(False)


def summary_shown(trainer: L.Trainer, module: L.LightningModule, caplog, capsys) -> str:
    """What the trainer's model summary callbacks print as a fit starts (logged or written)."""
    module._trainer = trainer
    caplog.clear()
    capsys.readouterr()  # what building the trainer said
    lightning = logging.getLogger(LIGHTNING_LOGGER)
    lightning.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger=LIGHTNING_LOGGER):
            for callback in trainer.callbacks:
                if isinstance(callback, L.pytorch.callbacks.ModelSummary):
                    callback.on_fit_start(trainer, module)
    finally:
        lightning.removeHandler(caplog.handler)
    captured = capsys.readouterr()
    return caplog.text + captured.out + captured.err


def demo_trainer(tmp_path, *overrides: str) -> L.Trainer:
    return build_trainer(load_config("demo", [f"output_dir={tmp_path}", *overrides]))


def test_the_model_summary_gives_the_parameters_and_no_flops_it_never_counted(
    tmp_path, caplog, capsys
):
    """Was: a FLOPs column of 0 for every module and "Total FLOPs: 0" (Lightning counts FLOPs
    only on an ``example_input_array``, which no genodiff module sets)."""
    shown = summary_shown(demo_trainer(tmp_path), TwoLayers(), caplog, capsys)
    assert "Trainable params" in shown, shown
    assert not re.search("flops", shown, re.IGNORECASE), shown
    counts = {what: int(n) for n, what in re.findall(r"^(\d+)\s+(\w[\w-]* params)$", shown, re.M)}
    assert counts == {"Trainable params": 16, "Non-trainable params": 10, "Total params": 26}
    rows = [line.split("|")[1].strip() for line in shown.splitlines() if line.count("|") >= 3]
    assert rows == ["Name", "trained", "frozen"]  # a row per module, under the header


class TwoLayersAveraged(TwoLayers):
    """``TwoLayers`` and an EMA of its trained layer (16 parameters more, none trained)."""

    def __init__(self) -> None:
        super().__init__()
        self.ema = EMA(self.trained, decay=0.9, warmup=False)


def counts_of(shown: str) -> dict[str, int]:
    """The summary's parameter counts (plain numbers: models under 1,000 parameters)."""
    return {what: int(n) for n, what in re.findall(r"^(\d+)\s+(\w[\w-]* params)\b", shown, re.M)}


def test_the_counts_are_the_models_own_and_the_ema_copy_is_counted_apart(tmp_path, caplog, capsys):
    """Was: the EMA copy of the weights counted as "Non-trainable params", so the total read
    as twice the model's size (26 + 16 = 42, with 26 non-trainable)."""
    shown = summary_shown(demo_trainer(tmp_path), TwoLayersAveraged(), caplog, capsys)
    assert counts_of(shown) == {
        "Trainable params": 16,
        "Non-trainable params": 10,
        "Total params": 26,
        "EMA params": 16,
    }
    assert "EMA params: the average of the weights kept beside them, not counted above" in shown
    rows = [line.split("|")[1].strip() for line in shown.splitlines() if line.count("|") >= 3]
    assert rows == ["Name", "trained", "frozen", "ema"]  # the EMA keeps its row
    # no EMA (ema.decay=0 has none): no EMA line
    assert "EMA" not in summary_shown(demo_trainer(tmp_path), TwoLayers(), caplog, capsys)


def test_the_summary_gives_the_papers_parameter_count(tmp_path, caplog, capsys):
    """Caduceus d118 x 4 layers, the MDLM paper's DNA model: 470,702 parameters (~470K), the
    total (the MDLM objective has none), and 470,702 float32 weights of 4 bytes in MB."""
    config = load_config("demo", [f"output_dir={tmp_path}", "model=caduceus_ph"])
    shown = summary_shown(build_trainer(config), GenerativeTrainingModule(config), caplog, capsys)
    assert "470 K      Total params" in shown, shown
    assert "0          Non-trainable params" in shown, shown
    assert "470 K      EMA params" in shown, shown
    assert f"{470_702 * 4 / 1e6:.3f}      Total estimated model params size (MB)" in shown


def test_a_run_that_turns_the_summary_off_prints_none(tmp_path, caplog, capsys):
    trainer = demo_trainer(tmp_path, "trainer.enable_model_summary=false")
    assert summary_shown(trainer, TwoLayers(), caplog, capsys) == ""


def test_the_summary_takes_the_arguments_of_every_supported_lightning(caplog):
    """pyproject allows lightning >= 2.2: its callback calls ``summarize`` with the four counts
    (2.2), then the training modes (2.4), then the FLOPs (2.6) too."""
    data = [(" ", ["0", "1"]), ("Name", ["trained", "frozen"]), ("FLOPs", ["0", "0"])]
    lightnings = [(), ({"train": 2, "eval": 0},), ({"train": 2, "eval": 0}, 0)]
    for later_counts in lightnings:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=log.name):
            ModelSummaryWithoutFlops().summarize(data, 26, 16, 1e-4, *later_counts)
        assert "16         Trainable params" in caplog.text and "FLOPs" not in caplog.text


def test_the_rules_span_the_widest_row(caplog):
    """Was: rules as wide as the header line, one short of the rows whose last column ("train"
    under "Mode") is wider than its header."""
    data = [(" ", ["0", "1"]), ("Name", ["trained", "frozen"]), ("Mode", ["train", "eval"])]
    with caplog.at_level(logging.INFO, logger=log.name):
        ModelSummaryWithoutFlops().summarize(data, 26, 16, 1e-4)
    lines = caplog.text.splitlines()
    rules = [line for line in lines if line and set(line) == {"-"}]
    table = [line for line in lines if "|" in line]
    assert len(rules) == 2 and len(table) == 3, caplog.text
    assert {len(rule) for rule in rules} == {max(map(len, table))}, caplog.text
