"""The table of modules and parameters a run prints as its training starts: Lightning's model
summary without its FLOPs column and total.

Lightning (2.5 and later) counts FLOPs only in a forward pass on the module's
``example_input_array``, which genodiff's modules do not set (a batch's shape is the data's),
so its summary printed 0 FLOPs for every module and "Total FLOPs: 0": a number that reads as
measured and is not.
"""

from __future__ import annotations

import logging
from typing import Any

from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.utilities.model_summary.model_summary import (
    get_formatted_model_size,
    get_human_readable_count,
)

# Where Lightning's own ModelSummary logs its table (shown by Lightning's console handler).
log = logging.getLogger("lightning.pytorch.callbacks.model_summary")

#: The summary's columns that Lightning fills without measuring anything for genodiff's modules.
UNMEASURED_COLUMNS = ("FLOPs",)


def summary_table(
    columns: list[tuple[str, list[str]]],
    total_parameters: int,
    trainable_parameters: int,
    model_size: float,
) -> str:
    """The modules as rows of ``columns`` (Lightning's ``(header, values)`` pairs) but the
    ``UNMEASURED_COLUMNS``, then the parameter counts and their size in MB."""
    shown = [(header, values) for header, values in columns if header not in UNMEASURED_COLUMNS]
    widths = [max([len(header), *map(len, values)]) for header, values in shown]
    rows = [[header for header, _ in shown], *zip(*(values for _, values in shown), strict=True)]
    lines = [" | ".join(map(str.ljust, row, widths)).rstrip() for row in rows]
    rule = "-" * max(map(len, lines))  # the widest row: a last column wider than its header
    totals = [
        (get_human_readable_count(trainable_parameters), "Trainable params"),
        (get_human_readable_count(total_parameters - trainable_parameters), "Non-trainable params"),
        (get_human_readable_count(total_parameters), "Total params"),
        (get_formatted_model_size(model_size), "Total estimated model params size (MB)"),
    ]
    return "\n".join([lines[0], rule, *lines[1:], rule, *(f"{n:<10} {what}" for n, what in totals)])


class ModelSummaryWithoutFlops(ModelSummary):
    """Lightning's ``ModelSummary`` callback, printed without the FLOPs it does not count
    (``summary_table``)."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        *counts: Any,  # the training modes (Lightning >= 2.4) and FLOPs (>= 2.6): not shown
        **summarize_kwargs: Any,
    ) -> None:
        table = summary_table(summary_data, total_parameters, trainable_parameters, model_size)
        log.info("\n" + table)
