"""The table of modules and parameters a run prints as its training starts: Lightning's model
summary without its FLOPs column and total, and with the model's own parameter counts.

Lightning (2.5 and later) counts FLOPs only in a forward pass on the module's
``example_input_array``, which genodiff's modules do not set (a batch's shape is the data's),
so its summary printed 0 FLOPs for every module and "Total FLOPs: 0": a number that reads as
measured and is not.

Lightning counts every parameter of the module, the EMA copies of the weights (``genodiff.model.
EMA``) among them, as "Non-trainable params": the total read as twice the model's size (the
number a paper gives). The counts here are the model's; the EMA's is a line of its own.
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.utilities.model_summary.model_summary import (
    get_formatted_model_size,
    get_human_readable_count,
)
from torch import nn

from genodiff.model import EMA

# Where Lightning's own ModelSummary logs its table (shown by Lightning's console handler).
log = logging.getLogger("lightning.pytorch.callbacks.model_summary")

#: The summary's columns that Lightning fills without measuring anything for genodiff's modules.
UNMEASURED_COLUMNS = ("FLOPs",)


def averaged_parameters(module: nn.Module) -> int:
    """The parameters of the EMA copies in ``module`` (``ema``, ``objective_ema``): none of
    them trained."""
    copies = [copy for copy in module.modules() if isinstance(copy, EMA)]
    return sum(parameter.numel() for copy in copies for parameter in copy.parameters())


def summary_table(
    columns: list[tuple[str, list[str]]],
    total_parameters: int,
    trainable_parameters: int,
    model_size: float,
    averaged: int = 0,
) -> str:
    """The modules as rows of ``columns`` (Lightning's ``(header, values)`` pairs) but the
    ``UNMEASURED_COLUMNS``, then the parameter counts and their size in MB, of all
    ``total_parameters`` but the ``averaged`` ones (the EMA's), which a last line counts."""
    shown = [(header, values) for header, values in columns if header not in UNMEASURED_COLUMNS]
    widths = [max([len(header), *map(len, values)]) for header, values in shown]
    rows = [[header for header, _ in shown], *zip(*(values for _, values in shown), strict=True)]
    lines = [" | ".join(map(str.ljust, row, widths)).rstrip() for row in rows]
    rule = "-" * max(map(len, lines))  # the widest row: a last column wider than its header
    own = total_parameters - averaged
    own_size = model_size * own / total_parameters if total_parameters else model_size
    totals = [
        (get_human_readable_count(trainable_parameters), "Trainable params"),
        (get_human_readable_count(own - trainable_parameters), "Non-trainable params"),
        (get_human_readable_count(own), "Total params"),
        (get_formatted_model_size(own_size), "Total estimated model params size (MB)"),
    ]
    if averaged:
        ema = "EMA params: the average of the weights kept beside them, not counted above"
        totals.append((get_human_readable_count(averaged), ema))
    return "\n".join([lines[0], rule, *lines[1:], rule, *(f"{n:<10} {what}" for n, what in totals)])


class ModelSummaryWithoutFlops(ModelSummary):
    """Lightning's ``ModelSummary`` callback, printed without the FLOPs it does not count and
    with the EMA's parameters apart from the model's (``summary_table``)."""

    averaged = 0  # the module's EMA parameters, counted as its fit starts

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.averaged = averaged_parameters(pl_module)
        super().on_fit_start(trainer, pl_module)

    def summarize(  # type: ignore[override]  # Lightning's is a staticmethod
        self,
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        *counts: Any,  # the training modes (Lightning >= 2.4) and FLOPs (>= 2.6): not shown
        **summarize_kwargs: Any,
    ) -> None:
        table = summary_table(
            summary_data, total_parameters, trainable_parameters, model_size, self.averaged
        )
        log.info("\n" + table)
