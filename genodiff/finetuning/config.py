"""The fine-tuning config schema (``configs/genomic_benchmarks.yaml``) and its loader.

Composed with Hydra like the training configs (``genodiff.config``): overrides such as
``benchmark.tasks=[human_or_worm] folds=3 trainer.max_epochs=2 model=mamba`` are applied, then
every key is checked against the dataclasses below (``model`` against the backbone class it
names, ``trainer`` against ``lightning.Trainer``); an unknown key raises ConfigError listing
the valid ones. Values are checked as the training config's are (``genodiff.config_values``):
their type against the field's annotation, their range against the ``config_ranges`` of the
dataclasses below (the backbone's and ``TRAINER_RANGES`` for ``model`` and ``trainer``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig, ListConfig, OmegaConf

from genodiff.checkpoints.run_folder import check_steps
from genodiff.config import (
    ConfigError,
    Schema,
    compose_config,
    project_root,
    resolve_checkpoint_reference,
    resolve_config_path,
    resolve_path,
    section_as_written,
    section_spec,
)
from genodiff.config_values import Spec, dataclass_spec

POOLINGS = ("mean", "max", "first", "last")
CLASS_WEIGHTS = ("none", "balanced")
MAX_SEED = 4294967295  # seed_everything takes uint32 seeds


@dataclass
class BenchmarkConfig:
    """Where the tasks are and how sequences are cut to length."""

    config_ranges: ClassVar[dict[str, str]] = {"max_length": ">=1"}

    root: str = "data/genomic_benchmarks"  # <root>/<task>/{train,test}/<class>/*.txt
    tasks: Any = None  # a task name or list of names; null = the 8 Genomic Benchmarks
    download: bool = True  # fetch a missing task with the genomic-benchmarks package
    # Left-pad / truncate to this many bases; null = the task's length from
    # genodiff.data.benchmarks.TASK_MAX_LENGTH, else the longest sequence of the task.
    max_length: int | None = None


@dataclass
class ClassifierConfig:
    """The head on the backbone's last hidden states and its reverse-complement handling."""

    pooling: str = "mean"  # mean (padding excluded) | max | first | last (real tokens only)
    rc_aug: bool = False  # train on rc(x) instead of x with probability 1/2
    conjoin_train: bool = False  # logits = (f(x) + f(rc(x))) / 2 while training
    conjoin_eval: bool = False  # the same at validation / test time (post-hoc conjoining)
    # none | balanced: cross-entropy weights n / (C * n_c) from the fold's training labels, so
    # a rare class counts as much as a common one (scikit-learn's "balanced" class weights)
    class_weights: str = "none"


@dataclass
class SweepConfig:
    """Grid of (lr, batch_size); the best per task on mean validation accuracy is reported.
    A single value is a one-point sweep."""

    config_ranges: ClassVar[dict[str, str]] = {"lr": ">0", "batch_size": ">=1"}

    lr: float | list[float] = field(default_factory=lambda: [1e-3])
    batch_size: int | list[int] = field(default_factory=lambda: [128])


@dataclass
class FinetuneOptimConfig:
    """AdamW with linear warm-up then cosine decay to ``min_lr_ratio * lr`` over all steps."""

    config_ranges: ClassVar[dict[str, str]] = {
        "betas": "[0, 1)",
        "eps": ">0",
        "weight_decay": ">=0",
        "warmup_fraction": "[0, 1); a fraction of all steps",
        "min_lr_ratio": "[0, 1]; the final lr as a fraction of the sweep's lr",
    }

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_fraction: float = 0.1
    min_lr_ratio: float = 0.0


@dataclass
class EarlyStoppingConfig:
    """Stop a fold when validation accuracy has not improved for ``patience`` epochs."""

    config_ranges: ClassVar[dict[str, str]] = {"patience": ">=0", "min_delta": ">=0"}

    patience: int = 3
    min_delta: float = 0.0


@dataclass
class FinetuneConfig:
    """Top-level keys of a fine-tuning config."""

    config_ranges: ClassVar[dict[str, str]] = {
        "seed": f"[0, {MAX_SEED}]",  # seed_everything: uint32
        "folds": ">=2; cross-validation needs at least 2 folds",
    }

    name: str = "finetune"
    seed: int = 0  # fold k trains with seed + k; the fold split itself uses ``seed``
    output_dir: str = "outputs/${name}"
    # PATH.ckpt (genodiff train checkpoint, EMA backbone), DIR (Hugging-Face-format folder),
    # a Hub id org/name[@revision] holding either, or null: build ``model`` from scratch.
    pretrained: str | None = None
    folds: int = 5
    keep_checkpoints: bool = True  # keep each fold's selected checkpoint on disk
    model: dict = field(default_factory=dict)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    optim: FinetuneOptimConfig = field(default_factory=FinetuneOptimConfig)
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    trainer: dict = field(default_factory=dict)


SECTIONS = {
    "benchmark": BenchmarkConfig,
    "classifier": ClassifierConfig,
    "sweep": SweepConfig,
    "optim": FinetuneOptimConfig,
    "early_stopping": EarlyStoppingConfig,
}


def _section_spec(cfg: DictConfig, section: str) -> Spec | None:
    if section == "model" and cfg.get("pretrained"):
        return None  # the architecture comes from the pretrained weights
    if section in ("model", "trainer"):
        return section_spec(cfg, section)
    return dataclass_spec(SECTIONS[section])


FINETUNE_SCHEMA = Schema(
    top=FinetuneConfig, sections=(*SECTIONS, "model", "trainer"), section_spec=_section_spec
)


def check_values(cfg: DictConfig) -> None:
    """Raise ConfigError for a value of the wrong kind (keys are checked by the schema)."""
    if cfg.get("model") is None and cfg.get("pretrained"):
        cfg.model = {}  # the pretrained weights bring their backbone's
    for section in (*SECTIONS, "model", "trainer"):
        if not isinstance(cfg.get(section), DictConfig):
            raise ConfigError(f"'{section}' must be a mapping, got {cfg.get(section)!r}")
    if cfg.classifier.pooling not in POOLINGS:
        raise ConfigError(
            f"classifier.pooling={cfg.classifier.pooling!r}: use one of {', '.join(POOLINGS)}"
        )
    if cfg.classifier.class_weights not in CLASS_WEIGHTS:
        raise ConfigError(
            f"classifier.class_weights={cfg.classifier.class_weights!r}: use one of "
            f"{', '.join(CLASS_WEIGHTS)}"
        )
    check_steps(cfg.trainer)  # a run that trains nothing is refused before any write
    _check_validation(cfg.trainer)
    for key in ("lr", "batch_size"):
        values = cfg.sweep[key]
        if not isinstance(values, ListConfig):
            cfg.sweep[key] = [values]  # a scalar is a one-point sweep
        elif len(values) == 0:
            raise ConfigError(f"sweep.{key} is empty: give at least one value")
    _check_sweep_points(list(cfg.sweep.lr), list(cfg.sweep.batch_size))
    tasks = cfg.benchmark.tasks
    if isinstance(tasks, str):
        cfg.benchmark.tasks = [tasks]
    _check_task_list(cfg.benchmark.tasks)
    last_seed = int(cfg.seed) + int(cfg.folds) - 1  # fold k trains with seed + k
    if last_seed > MAX_SEED:
        raise ConfigError(
            f"seed={cfg.seed}: fold k trains with seed + k, and the last fold's "
            f"{last_seed} is above {MAX_SEED} (seed_everything's limit); set seed at most "
            f"{MAX_SEED - int(cfg.folds) + 1}"
        )


def _check_validation(trainer: DictConfig) -> None:
    """ConfigError for ``trainer`` settings under which a fold never validates: its checkpoint
    is selected, and its training stopped early, on validation accuracy (Lightning stops such
    a fold with a traceback, after its training)."""
    why = "each fold's checkpoint is chosen (and early stopping decides) on validation accuracy"
    if trainer.get("limit_val_batches") == 0:
        raise ConfigError(
            f"trainer.limit_val_batches=0 runs no validation, and {why}; leave it out or give "
            "a number of batches (or a fraction) above 0"
        )
    every, epochs = trainer.get("check_val_every_n_epoch"), trainer.get("max_epochs")
    if isinstance(every, int) and isinstance(epochs, int) and 0 < epochs < every:
        raise ConfigError(
            f"trainer.check_val_every_n_epoch={every} validates none of the "
            f"trainer.max_epochs={epochs} epochs, and {why}; set it at most {epochs}"
        )


def sweep_tag(lr: float, batch_size: int) -> str:
    """The name of a sweep point's folder (``runs/<task>/<tag>/fold<k>``)."""
    return f"lr{lr:g}_bs{batch_size}"


def _check_sweep_points(lrs: list[float], batch_sizes: list[int]) -> None:
    """ConfigError when two (lr, batch_size) points share a folder: a value listed twice, or
    two lrs alike to 6 significant digits. The second would take the first's results."""
    seen: set[str] = set()
    for lr, batch_size in itertools.product(lrs, batch_sizes):
        tag = sweep_tag(lr, batch_size)
        if tag in seen:
            raise ConfigError(
                f"sweep.lr={lrs} with sweep.batch_size={batch_sizes} gives the sweep point "
                f"{tag} twice; list each value once (lrs equal to 6 significant digits "
                "are one point)"
            )
        seen.add(tag)


def _check_task_list(tasks: ListConfig | None) -> None:
    """ConfigError for an empty ``benchmark.tasks`` (null means all 8), a task that is no
    folder name (``a/b``, ``..``) or one named twice."""
    if tasks is None:
        return
    if len(tasks) == 0:
        raise ConfigError(
            "benchmark.tasks is empty: name at least one task, or null for the 8 Genomic Benchmarks"
        )
    for task in map(str, tasks):  # a folder under benchmark.root, and under output_dir/runs
        if task in ("", ".", "..") or "/" in task or "\\" in task:
            raise ConfigError(
                f"benchmark.tasks: {task!r} is not a task's folder name; name a folder directly "
                "under benchmark.root (no / or ..)"
            )
    repeated = sorted({str(t) for t in tasks if list(tasks).count(t) > 1})
    if repeated:
        raise ConfigError(
            f"benchmark.tasks names {', '.join(repeated)} more than once; name each task once"
        )


def sets_section(overrides: Sequence[str], section: str) -> bool:
    """Whether one of the Hydra ``overrides`` sets ``section`` or a key in it
    (``model=mamba``, ``model.d_model=32``, ``+model.x=1``)."""
    keys = (override.lstrip("+~").split("=", 1)[0] for override in overrides)
    return any(key == section or key.startswith(f"{section}.") for key in keys)


@dataclass(frozen=True)
class GivenModel:
    """The ``model`` settings a run was given besides its defaults list's option
    (``GivenModel.of``): all of them (``settings``: the config file's own ``model:`` section
    with the ``model`` overrides on it) and the file's section alone (``written``, empty
    where the file has none) in ``file``."""

    settings: dict[str, Any]
    written: dict[str, Any]
    file: Path

    @classmethod
    def of(cls, config: str | Path, overrides: Sequence[str]) -> GivenModel | None:
        """What ``config`` and ``overrides`` set of ``model`` besides the option the defaults
        list picks (``section_as_written``); None when they set nothing. The defaults list's
        option (configs/genomic_benchmarks_demo.yaml's ``override model: caduceus_tiny``) is
        the model a from-scratch run trains, so it is not taken as given."""
        settings = section_as_written(config, overrides, "model", FINETUNE_SCHEMA)
        if not settings:
            return None
        written = settings
        if sets_section(overrides, "model"):
            written = section_as_written(config, (), "model", FINETUNE_SCHEMA) or {}
        return cls(settings, written, resolve_config_path(config))


def load_finetune_config(config: str | Path, overrides: list[str] | None = None) -> DictConfig:
    """Compose ``config`` with ``overrides``, fill defaults, validate, resolve paths."""
    cfg, config_file = compose_config(config, overrides, FINETUNE_SCHEMA)
    check_values(cfg)
    root = project_root(config_file)
    cfg.benchmark.root = resolve_path(cfg.benchmark.root, root)
    if cfg.pretrained:
        cfg.pretrained = resolve_checkpoint_reference(cfg.pretrained, root)
    OmegaConf.resolve(cfg)
    return cfg
