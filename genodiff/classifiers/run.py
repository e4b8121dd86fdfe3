"""``genodiff.train_classifier`` (and ``genodiff classifier CONFIG``): train a guidance
classifier and save it. Every check comes before the first write into ``output_dir``, which
the main process alone takes (``genodiff.training.session``), as ``genodiff train`` does.

Those of the config (its keys and values: ``genodiff.classifiers.config``), of its data files
and of its generator come here, before Lightning (seconds to import) is imported, as
``genodiff.training.run`` does: a refused config says its line at once. Then
``genodiff.classifiers.fit_run`` builds the classifier and the Trainer, trains and reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from genodiff import registry
from genodiff.checkpoints import load_model
from genodiff.classifiers.checkpoint import classifier_record
from genodiff.classifiers.config import load_classifier_config
from genodiff.config import ConfigError, run_overrides, with_tokenizer_fields
from genodiff.data.build import build_datamodule
from genodiff.model import GenerativeModel
from genodiff.progress import progress_wanted
from genodiff.tokenizers import Tokenizer, build_tokenizer


def train_classifier(
    config: str | Path,
    overrides: Sequence[str] = (),
    output_dir: str | Path | None = None,
    *,
    progress: bool | None = None,
) -> Path:
    """Train the classifier the config ``config`` describes (``genodiff.classifiers.config``:
    a YAML path or a config name such as ``classifier_demo``) with Hydra ``overrides``
    (``["generator=outputs/conditional_demo", "kind=causal"]``) into ``output_dir`` (default:
    the config's); returns the path of its last checkpoint, which ``genodiff sample
    --classifier`` and ``Model.generate(classifier=...)`` take. The same run as
    ``genodiff classifier CONFIG OVERRIDES...``."""
    overrides = run_overrides(overrides, output_dir)
    cfg = load_classifier_config(config, overrides)
    progress_bar = progress_wanted() if progress is None else progress
    datamodule = build_datamodule(cfg.data)
    datamodule.check_files()  # missing data fails here
    classes = datamodule.class_names()
    generator = load_model(cfg.generator) if cfg.generator else None
    tokenizer = generator.tokenizer if generator else build_tokenizer(cfg.tokenizer)
    if generator is not None:
        check_generator(generator, cfg, classes)
    process = generator.objective.process if cfg.kind == "noisy" else None
    datamodule.attach_tokenizer(tokenizer)
    record = classifier_record(
        cfg.kind,
        classes,
        classifier_model_config(cfg, tokenizer),
        cfg.pooling,
        cfg.generator,
        generator.config["objective"] if generator else None,
    )
    from genodiff.classifiers.fit_run import fit_classifier  # Lightning, once all has passed

    return fit_classifier(cfg, datamodule, tokenizer, record, process, progress_bar)


def check_generator(generator: GenerativeModel, cfg: DictConfig, classes: list[str]) -> None:
    """ConfigError when ``generator`` cannot go with this classifier: a noisy classifier
    needs a generator with noisy states (masked or uniform diffusion); a conditional
    generator's classes must be the data's (the classifier's label ids are the generator's)."""
    objective = generator.config["objective"]["name"]
    if cfg.kind == "noisy" and generator.objective.noisy_states is None:
        raise ConfigError(
            f"generator={cfg.generator} is a {objective} model; a noisy classifier learns from "
            "the noisy states of a discrete diffusion generator's forward process (masked: "
            "mdlm, sedd, d3pm; uniform: udlm)"
        )
    if generator.class_names is not None and generator.class_names != classes:
        raise ConfigError(
            f"generator={cfg.generator} was trained on the classes "
            f"{', '.join(generator.class_names)}, and the data's are {', '.join(classes)}; use "
            "the generator's data (same classes, same order)"
        )
    if generator.tokenizer.domain != registry.get("data", cfg.data.name).domain:
        raise ConfigError(
            f"generator={cfg.generator} models {generator.tokenizer.domain} "
            f"({generator.tokenizer.name} tokenizer), and data.name={cfg.data.name} is "
            f"{registry.get('data', cfg.data.name).domain}"
        )


def classifier_model_config(cfg: DictConfig, tokenizer: Tokenizer) -> dict[str, Any]:
    """The ``model`` section with the tokenizer's ids and sizes; a classifier's backbone
    takes no class label (its head predicts it)."""
    section = OmegaConf.to_container(cfg.model, resolve=True)
    if section.get("num_classes"):
        raise ConfigError(
            "model.num_classes: a classifier's backbone is not class-conditioned (its head "
            "predicts the class); remove model.num_classes"
        )
    cls = registry.get("backbone", section["name"])
    return with_tokenizer_fields("model", cls, section, tokenizer)
