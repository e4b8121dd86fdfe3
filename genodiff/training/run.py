"""``genodiff.train`` (and ``genodiff train``): a config in, a finished run folder out.

Every check comes before the first write into ``output_dir`` (``genodiff.training.session``).
Those of the config (its keys and values: ``genodiff.config``), of its settings that need no
model (``genodiff.training.run_checks``) and of its data files come here, before Lightning
(seconds to import) is imported: a refused config says its line at once. Then
``genodiff.training.fit_run`` builds the model and the Trainer, trains, reports the best
checkpoint and the test score, and draws the samples of the ``samples:`` section.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from genodiff.checkpoints import run_folder
from genodiff.conditioning import record_class_names
from genodiff.config import load_config, run_overrides
from genodiff.data.build import build_datamodule, record_window
from genodiff.progress import progress_wanted
from genodiff.training.run_checks import (
    check_ema_moves,
    check_ema_precision,
    ema_settings,
    trainer_kwargs,
)


def train(
    config: str | Path,
    overrides: Sequence[str] = (),
    output_dir: str | Path | None = None,
    *,
    progress: bool | None = None,
) -> Path:
    """Train the run ``config`` (a YAML path or a config name such as ``demo``) with Hydra
    ``overrides`` (``["trainer.max_steps=20", "model=caduceus_tiny"]``) into ``output_dir``
    (default: the config's); returns the run folder, as an absolute path. The same run as
    ``genodiff train CONFIG OVERRIDES... output_dir=DIR``. ``progress``: the training's progress
    (Lightning's bar on a terminal, plain lines elsewhere) and the sampling line on (True), off
    (False), or as ``genodiff.progress.progress_wanted`` says."""
    overrides = run_overrides(overrides, output_dir)
    cfg = load_config(config, overrides)
    show = progress_wanted() if progress is None else progress
    # Every check comes before the first write into output_dir.
    run_folder.check_steps(cfg.trainer)  # a run that would train nothing
    ema_decay, ema_warmup = ema_settings(cfg)
    check_ema_precision(trainer_kwargs(cfg)["precision"], ema_decay)  # an average stuck at init
    check_ema_moves(ema_decay, ema_warmup)
    datamodule = build_datamodule(cfg.data)
    record_window(cfg.data)  # the window a data module takes by default, named in the run
    datamodule.check_files()  # missing data fails here, before any model setup
    classes = datamodule.class_names()
    if classes is not None:  # labelled data: a class-conditional model (genodiff.conditioning)
        record_class_names(cfg, classes)
    from genodiff.training.fit_run import fit_run  # Lightning, once the config has passed

    return fit_run(cfg, config, datamodule, classes, show)
