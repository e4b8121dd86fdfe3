"""The ``genodiff classifier`` config schema (``configs/classifier_demo.yaml``) and its loader.

Composed with Hydra like the training configs (``genodiff.config``): ``model`` is checked
against the backbone it names, ``data`` against the data module (it must be
``data.name=labelled``), ``trainer`` against ``lightning.Trainer``, ``optim`` as
``genodiff train``'s; the top-level keys are ``ClassifierRunConfig``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from omegaconf import DictConfig, OmegaConf

from genodiff.checkpoints.run_folder import check_steps
from genodiff.classifiers.model import KINDS
from genodiff.config import (
    ConfigError,
    OptimConfig,
    Schema,
    check_training_config,
    compose_config,
    project_root,
    resolve_checkpoint_reference,
    resolve_data_paths,
    section_spec,
)
from genodiff.finetuning.config import POOLINGS


@dataclass
class ClassifierRunConfig:
    """Top-level keys of a classifier run.

    ``kind``: noisy (D-CBG: bidirectional backbone, inputs z_t from ``generator``'s forward
    process, masked or uniform) or causal (FUDGE: causal backbone, clean prefixes, the label
    at every position). ``generator``: the diffusion checkpoint (MDLM, SEDD, D3PM: masked
    states; UDLM: uniform) a noisy classifier is trained for (required for noisy); its
    tokenizer and class names must match the data's. ``val_times``: the noise levels t at
    which validation accuracy is reported (besides clean inputs, t = 0)."""

    config_ranges: ClassVar[dict[str, str]] = {
        "seed": "[0, 4294967295]",
        "val_times": "(0, 1]",
    }

    name: str = "classifier"
    seed: int = 0
    output_dir: str = "outputs/${name}"
    kind: str = "noisy"
    generator: str | None = None
    pooling: str = "mean"
    val_times: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75])
    tokenizer: dict = field(default_factory=lambda: {"name": "dna"})
    model: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    trainer: dict = field(default_factory=dict)
    optim: OptimConfig = field(default_factory=OptimConfig)


SECTIONS = ("model", "data", "tokenizer", "trainer", "optim")


CLASSIFIER_SCHEMA = Schema(top=ClassifierRunConfig, sections=SECTIONS, section_spec=section_spec)


def load_classifier_config(config: str | Path, overrides: list[str] | None = None) -> DictConfig:
    """Compose ``config`` with ``overrides``, validate it, resolve its paths."""
    cfg, config_file = compose_config(config, overrides, CLASSIFIER_SCHEMA)
    if cfg.kind not in KINDS:
        raise ConfigError(f"kind={cfg.kind!r}: use one of {', '.join(KINDS)}")
    if cfg.pooling not in POOLINGS:
        raise ConfigError(f"pooling={cfg.pooling!r}: use one of {', '.join(POOLINGS)}")
    if cfg.data.name != "labelled":
        raise ConfigError(
            f"data.name={cfg.data.name}: a classifier learns from labelled sequences; use "
            "data=labelled (data.root + data.task, or data.fasta_by_label)"
        )
    if cfg.kind == "noisy" and not cfg.generator:
        raise ConfigError(
            "kind=noisy needs generator=PATH: the diffusion checkpoint (mdlm, sedd, d3pm, "
            "udlm) whose forward process draws the noisy inputs the classifier learns from"
        )
    check_steps(cfg.trainer)  # a run that would train nothing
    root = project_root(config_file)
    resolve_data_paths(cfg, root)
    if cfg.generator:
        cfg.generator = resolve_checkpoint_reference(cfg.generator, root)
    OmegaConf.resolve(cfg)
    check_training_config(cfg)
    return cfg
