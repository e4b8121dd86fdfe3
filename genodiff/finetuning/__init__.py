"""Fine-tuning on Genomic Benchmarks-style classification tasks with k-fold cross-validation.

``genodiff.finetune`` (and ``genodiff finetune configs/genomic_benchmarks.yaml``): ``config``
(schema), ``classifier`` (pooling head, RC handling), ``module`` (Lightning loop),
``protocol`` (folds, sweep, resume; runs spread over processes by ``genodiff.parallel``),
``results`` (CSV / JSON / Markdown / PNG), ``trained`` (a fine-tuned checkpoint loaded back).
The task folders are read by ``genodiff.data.benchmarks``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> the module that defines it, imported on first use: importing a submodule (the
# classifier head, for a guidance classifier) imports no Lightning loop
_API = {
    "FinetuneResults": "genodiff.finetuning.run",
    "finetune": "genodiff.finetuning.run",
    "load_finetune_config": "genodiff.finetuning.config",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'genodiff.finetuning' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value
    return value
