"""Fine-tuning on Genomic Benchmarks-style classification tasks with k-fold cross-validation.

``genodiff finetune configs/genomic_benchmarks.yaml``: ``config`` (schema), ``data`` (task
folders), ``classifier`` (pooling head, RC handling), ``module`` (Lightning loop),
``protocol`` (folds, sweep, resume), ``results`` (CSV / JSON / Markdown / PNG).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from genodiff.finetune.config import load_finetune_config
from genodiff.finetune.protocol import run_benchmark
from genodiff.finetune.results import markdown_table, write_results

__all__ = ["finetune", "load_finetune_config"]


def finetune(cfg: DictConfig, progress_bar: bool = True) -> dict[str, Path]:
    """Run (or resume) every fold of ``cfg`` and write the results; returns their paths.
    ``progress_bar``: False turns Lightning's off (else ``trainer.enable_progress_bar`` says)."""
    source = cfg.pretrained or f"{cfg.model.name} from scratch"
    results = run_benchmark(cfg, progress_bar)
    paths = write_results(results, Path(cfg.output_dir), source)
    print(markdown_table(results, source))
    return paths
