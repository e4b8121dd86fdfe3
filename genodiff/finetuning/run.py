"""``genodiff.finetune``: a fine-tuning config run end to end, its results written and
returned (``FinetuneResults``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genodiff.config import run_overrides
from genodiff.finetuning.config import GivenModel, load_finetune_config
from genodiff.finetuning.results import markdown_table, summarize, write_results
from genodiff.progress import progress_wanted

__all__ = ["FinetuneResults", "finetune"]


@dataclass
class FinetuneResults:
    """What a fine-tuning wrote: per task its classes, window, selected sweep point and every
    run's record (``tasks``), the summary over the selected folds (``summary``: mean, min and
    max test accuracy, ...), the paper-style table (``table``, Markdown) and the files
    (``files``: csv, json, md, png under ``output_dir``); paths are absolute."""

    output_dir: Path
    model: str
    tasks: dict[str, Any]
    summary: dict[str, dict[str, float]]
    table: str
    files: dict[str, Path]


def finetune(
    config: str | Path,
    overrides: Sequence[str] = (),
    output_dir: str | Path | None = None,
    *,
    progress: bool | None = None,
) -> FinetuneResults | None:
    """Run (or resume) every fold of the fine-tuning config ``config`` (a YAML path or a config
    name such as ``genomic_benchmarks_demo``) with Hydra ``overrides`` (``["folds=3",
    "pretrained=outputs/demo"]``) into ``output_dir`` (default: the config's) and write the
    results; the same as ``genodiff finetune CONFIG OVERRIDES...``. ``progress``: Lightning's
    bars on, off, or as ``genodiff.progress.progress_wanted`` says (None). Returns the
    results in the main process; None in the other processes of a multi-process run
    (``trainer.devices`` > 1: the runs are spread over them, ``genodiff.parallel``)."""
    overrides = run_overrides(overrides, output_dir)
    cfg = load_finetune_config(config, overrides)
    source = cfg.pretrained or f"{cfg.model.name} from scratch"
    show = progress_wanted() if progress is None else progress
    given = GivenModel.of(config, overrides) if cfg.pretrained else None
    # Lightning is imported here, once the config is checked: a refused one is said sooner
    from genodiff.finetuning.protocol import run_benchmark

    results = run_benchmark(cfg, show, given_model=given)
    if results is None:
        return None
    out = Path(cfg.output_dir).absolute()  # usable from any working directory
    files = write_results(results, out, source)
    table = markdown_table(results, source)
    return FinetuneResults(out, source, results, summarize(results), table, files)
