"""The part of a classifier run (``genodiff.classifiers.run.train_classifier``) that needs
Lightning, once the config, the data files and the generator have passed their checks: the
classifier and the Trainer built, the checks that need the Trainer, the training and the
report of its validation accuracy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig, OmegaConf

from genodiff.classifiers.model import build_classifier
from genodiff.classifiers.noise import NoisyStates
from genodiff.classifiers.training import ClassifierTrainingModule
from genodiff.config import ConfigError
from genodiff.data.base import DataModule
from genodiff.data.labelled import class_count_lines
from genodiff.tokenizers import Tokenizer
from genodiff.training.lightning_data import LightningData
from genodiff.training.session import check_output, fit, hold_output
from genodiff.training.trainer import build_trainer

# A classifier run is not resumed: a stopped one is trained again from the start.
RESUME_HINT = "Run the same command again with another output_dir (a classifier run restarts)"


def fit_classifier(
    cfg: DictConfig,
    datamodule: DataModule,
    tokenizer: Tokenizer,
    record: dict[str, Any],
    process: NoisyStates | None,
    progress_bar: bool,
) -> Path:
    """Train the classifier of ``cfg`` (checked, with its data files: ``datamodule``, its
    tokenizer attached) that ``record`` (``classifier_record``) describes, on the noisy states
    of ``process`` (a noisy classifier's generator's forward process; None: clean inputs);
    returns the path of its last checkpoint. ``progress_bar``: Lightning's bar on or off."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)  # a refused run says one line
    classes = record["class_names"]
    classifier = build_classifier(record["model"], len(classes), cfg.kind, tokenizer, cfg.pooling)
    config = OmegaConf.to_container(cfg, resolve=True)
    module = ClassifierTrainingModule(classifier, tokenizer, record, config, process)
    try:
        trainer = build_trainer(
            cfg, progress_bar, monitor="val/acc", mode="max", label="genodiff classifier"
        )
    except ValueError as err:  # Lightning refuses the trainer section's settings
        raise ConfigError(str(err)) from err
    datamodule.dataset_of("valid")  # windows that cannot be cut fail here
    datamodule.check_batch_size(trainer.world_size)
    out = Path(cfg.output_dir)
    check_output(out, None, None, config)
    with hold_output(out, config) as main_process:
        if main_process:
            print(f"genodiff: training a {cfg.kind} classifier {cfg.name}; outputs in {out}")
            for line in class_count_lines(datamodule):
                print(line)
        fit(trainer, module, "classifier", RESUME_HINT, datamodule=LightningData(datamodule))
    last = Path(trainer.checkpoint_callback.last_model_path)
    if trainer.is_global_zero:
        print(accuracy_line(trainer.callback_metrics))
        print(f"genodiff: wrote {last}")
    return last


def accuracy_line(metrics: dict[str, Any]) -> str:
    """The final validation accuracies, one line."""
    parts = [
        f"{name.removeprefix('val/')} {float(value):.3f}"
        for name, value in sorted(metrics.items())
        if name.startswith("val/acc")
    ]
    return "genodiff: validation accuracy: " + (", ".join(parts) or "none (no validation ran)")
