"""Experiment configs: Hydra compose API over ``configs/*.yaml``, overrides, and validation.

An experiment file (``configs/hg38.yaml``) picks one entry of each group (``model/``,
``objective/``, ``data/``, ``trainer/``) in its defaults list and sets the rest. Every key is
checked before anything is built: the ``model``, ``objective`` and ``data`` sections against
the keyword arguments of the registered class they name, ``trainer`` against
``lightning.Trainer``, the others against the dataclasses below. A misspelt key fails at once
with the valid keys listed.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from genodiff import registry
from genodiff.hub import parse_hub_id
from genodiff.resources import resource

GROUPS = ("model", "objective", "data", "trainer")
# Trainer arguments genodiff sets itself (from output_dir and the sections below).
TRAINER_RESERVED = ("logger", "callbacks", "default_root_dir", "plugins", "enable_checkpointing")


class ConfigError(ValueError):
    """A config key or value that cannot be used; the message says what to change."""


@dataclass
class OptimConfig:
    """AdamW with linear warm-up then cosine decay to ``min_lr_ratio * lr``."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    warmup_fraction: float = 0.1  # of trainer.max_steps
    min_lr_ratio: float = 0.1


@dataclass
class EMAConfig:
    """Exponential moving average of the weights, used for validation and sampling."""

    decay: float = 0.9999
    # decay_k = min(decay, (1 + k) / (10 + k)) at update k: short runs get a usable average.
    warmup: bool = False


@dataclass
class SamplesConfig:
    """Sequences written as FASTA to ``output_dir/samples.fa`` when training ends."""

    num_samples: int = 0
    length: int = 1024
    steps: int = 256
    sampler: str | None = None  # None: the objective's default (ancestral, analytic for SEDD)
    seed: int = 0
    batch_size: int = 16


@dataclass
class RunConfig:
    """Top-level keys; ``model``/``objective``/``data``/``trainer`` are free-form sections."""

    name: str = "genodiff"
    seed: int = 0
    output_dir: str = "outputs/${name}"
    ckpt_path: str | None = None  # resume from this Lightning checkpoint ("last" for the latest)
    evaluate_test: bool = True  # score the best checkpoint on the test split after training
    # Start the backbone from a Hugging-Face-format folder (e.g. a Caduceus MLM, or the output
    # of ``genodiff export``) or a Hub id org/name[@revision] holding one: pre-train as MLM,
    # then fine-tune with a diffusion objective.
    init_from: str | None = None
    # The vocabulary: {"name": "dna"} by default; plugins register others (text: bert, gpt2,
    # a WordPiece / BPE trained on the data). Objectives and backbones take their ids from it.
    tokenizer: dict = field(default_factory=lambda: {"name": "dna"})
    model: dict = field(default_factory=dict)
    objective: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    trainer: dict = field(default_factory=dict)
    optim: OptimConfig = field(default_factory=OptimConfig)
    ema: EMAConfig = field(default_factory=EMAConfig)
    samples: SamplesConfig = field(default_factory=SamplesConfig)


def _signature_keys(fn: Any, drop: tuple[str, ...] = ()) -> list[str]:
    params = inspect.signature(fn).parameters.values()
    return [
        p.name
        for p in params
        if p.name not in ("self", *drop) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _dataclass_keys(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def section_keys(cfg: DictConfig, section: str) -> list[str]:
    """The keys ``section`` accepts, given the class it names (for model/objective/data)."""
    if section == "trainer":
        return _signature_keys(lightning.Trainer.__init__, drop=TRAINER_RESERVED)
    if section in ("model", "objective", "data", "tokenizer"):
        kind = "backbone" if section == "model" else section
        name = OmegaConf.select(cfg, f"{section}.name")
        if name is None:
            raise ConfigError(f"'{section}.name' is missing: say which {kind} to use")
        try:
            cls = registry.get(kind, name)
        except KeyError as err:
            raise ConfigError(f"{section}.name={name!r}: {err.args[0]}") from None
        return ["name", *_signature_keys(cls.__init__)]
    schema = {"optim": OptimConfig, "ema": EMAConfig, "samples": SamplesConfig}[section]
    return _dataclass_keys(schema)


def _unknown_key_error(dotted: str, valid: list[str]) -> ConfigError:
    return ConfigError(
        f"unknown config key '{dotted}'. Valid keys here: {', '.join(sorted(valid))}"
    )


@dataclass(frozen=True)
class Schema:
    """What a kind of config file may hold.

    ``top`` is the dataclass of its top-level keys; ``sections`` are the mapping sections whose
    keys are checked, with ``section_keys(cfg, section)`` giving the accepted keys (None: that
    section is free-form and not checked).
    """

    top: type
    sections: tuple[str, ...]
    section_keys: Callable[[DictConfig, str], list[str] | None]

    def valid_keys_for(self, cfg: DictConfig, dotted: str) -> list[str] | None:
        """Valid keys at the level of ``dotted`` (None when that level is free-form)."""
        parts = dotted.split(".")
        if len(parts) == 1:
            return _dataclass_keys(self.top)
        if len(parts) == 2 and parts[0] in self.sections:
            return self.section_keys(cfg, parts[0])
        return None

    def validate(self, cfg: DictConfig) -> None:
        """Raise ConfigError for any key that no section accepts."""
        top = _dataclass_keys(self.top)
        for key in cfg:
            if key not in top:
                raise _unknown_key_error(str(key), top)
        for section in self.sections:
            value = cfg.get(section)
            if value is None:
                continue
            if not isinstance(value, DictConfig):
                raise ConfigError(f"'{section}' must be a mapping, got {value!r}")
            valid = self.section_keys(cfg, section)
            for key in value if valid is not None else ():
                if key not in valid:
                    raise _unknown_key_error(f"{section}.{key}", valid)


TRAINING_SCHEMA = Schema(
    top=RunConfig,
    sections=("model", "objective", "data", "tokenizer", "trainer", "optim", "ema", "samples"),
    section_keys=section_keys,
)


_ASSIGNMENT = re.compile(r"^(?P<key>[A-Za-z_][\w.]*)=(?P<value>.*)$", re.S)


def _split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    groups, values = [], []
    for override in overrides:
        match = _ASSIGNMENT.match(override)
        if match and match["key"] in GROUPS and "." not in match["key"]:
            groups.append(override)
        else:
            values.append(override)
    return groups, values


def _compose(config_file: Path, overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(config_file.parent), version_base=None):
        try:
            return compose(config_name=config_file.stem, overrides=overrides)
        except HydraException as err:
            message = str(err).split("\nConfig search path:")[0].strip()
            raise ConfigError(f"{config_file}: {message}") from None


def _with_additions(base: DictConfig, overrides: list[str], schema: Schema) -> list[str]:
    """Turn ``trainer.max_steps=5`` into ``+trainer.max_steps=5`` when the YAML lacks the key
    but the section accepts it; reject keys that no section accepts."""
    resolved = []
    for override in overrides:
        match = _ASSIGNMENT.match(override)
        if match is None:  # '+key=', '~key', '++key=' etc: Hydra's own syntax, checked later
            resolved.append(override)
            continue
        key = match["key"]
        if OmegaConf.select(base, key, default="__missing__") != "__missing__":
            resolved.append(override)
            continue
        valid = schema.valid_keys_for(base, key)
        leaf = key.split(".")[-1]
        if valid is not None and leaf not in valid:
            raise _unknown_key_error(key, valid)
        resolved.append("+" + override)
    return resolved


def resolve_config_path(config: str | Path) -> Path:
    """A path to a YAML file, or a bare experiment name looked up in ./configs, then among the
    configs genodiff ships (``genodiff.resources``): ``demo`` and ``configs/demo.yaml`` work
    from any folder, and from a wheel."""
    path = Path(config)
    yaml = path.with_suffix(".yaml")
    candidates = [path, yaml, Path("configs") / yaml]
    if not path.is_absolute():
        shipped = yaml.relative_to("configs") if yaml.parts[0] == "configs" else yaml
        candidates.append(resource("configs") / shipped)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(
        f"config file {str(config)!r} not found (looked at {', '.join(map(str, candidates))}); "
        "pass a path such as configs/demo.yaml"
    )


def project_root(config_file: Path) -> Path:
    """The folder relative data paths are resolved against: the parent of ``configs/``."""
    return config_file.parent.parent if config_file.parent.name == "configs" else Path.cwd()


def resolve_path(path: str, root: Path) -> str:
    """``path`` as given if it exists from the working directory, else relative to ``root``."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return str(candidate.resolve())
    return str((root / candidate).resolve())


def resolve_checkpoint_reference(reference: str, root: Path) -> str:
    """``init_from=`` / ``pretrained=``: as ``resolve_path``, except that a reference found at
    neither place that spells a Hugging Face Hub id (``org/name[@revision]``) is kept as it is,
    for ``genodiff.hub`` to fetch."""
    resolved = resolve_path(reference, root)
    if Path(resolved).exists() or parse_hub_id(reference) is None:
        return resolved
    return reference


def compose_config(
    config: str | Path, overrides: list[str] | None, schema: Schema
) -> tuple[DictConfig, Path]:
    """Compose ``config`` with Hydra-style ``overrides``, add the schema's defaults for the
    non-group keys and validate; returns the config and the resolved YAML path."""
    config_file = resolve_config_path(config)
    group_overrides, value_overrides = _split_overrides(list(overrides or []))
    base = _compose(config_file, group_overrides)
    additions = _with_additions(base, value_overrides, schema)
    cfg = _compose(config_file, group_overrides + additions)
    OmegaConf.set_struct(cfg, False)
    defaults = OmegaConf.to_container(OmegaConf.structured(schema.top))
    cfg = OmegaConf.merge({k: v for k, v in defaults.items() if k not in GROUPS}, cfg)
    schema.validate(cfg)
    return cfg, config_file


# ``data:`` keys holding a file or folder, resolved against the project root when relative
# (the DNA modules' fasta / bed / cache_dir, the text plugin's path / root).
DATA_PATH_KEYS = ("fasta", "bed", "cache_dir", "path", "root")


def load_config(config: str | Path, overrides: list[str] | None = None) -> DictConfig:
    """Compose a training config with ``overrides``, validate it, resolve data paths."""
    cfg, config_file = compose_config(config, overrides, TRAINING_SCHEMA)
    root = project_root(config_file)
    for key in DATA_PATH_KEYS:
        if cfg.data.get(key):
            cfg.data[key] = resolve_path(cfg.data[key], root)
    if cfg.get("init_from"):
        cfg.init_from = resolve_checkpoint_reference(cfg.init_from, root)
    OmegaConf.resolve(cfg)
    return cfg


# Constructor arguments that the tokenizer provides: argument -> tokenizer attribute. Plaid
# calls its modelled ids ``token_ids``; every sampler's drawable ids are ``sample_ids``.
TOKENIZER_FIELDS = {
    "vocab_size": "vocab_size",
    "mask_id": "mask_id",
    "pad_id": "pad_id",
    "bos_id": "bos_id",
    "sample_ids": "sample_ids",
    "token_ids": "sample_ids",
}


def with_tokenizer_fields(
    section: str, cls: type, kwargs: dict[str, Any], tokenizer: Any
) -> dict[str, Any]:
    """``kwargs`` for ``cls`` with the ids and sizes its constructor takes filled in from
    ``tokenizer``. A value the config sets itself must agree (``vocab_size``: be at least the
    tokenizer's, models may pad it); otherwise ConfigError."""
    accepted = set(_signature_keys(cls.__init__))
    out = dict(kwargs)
    for argument, attribute in TOKENIZER_FIELDS.items():
        if argument not in accepted:
            continue
        value = getattr(tokenizer, attribute)
        value = list(value) if isinstance(value, tuple) else value
        if argument not in out or out[argument] is None:
            out[argument] = value
            continue
        given = list(out[argument]) if isinstance(out[argument], list | tuple) else out[argument]
        if argument == "vocab_size" and given < value:
            raise ConfigError(
                f"{section}.vocab_size={given} is smaller than the {tokenizer.name} tokenizer's "
                f"{value} ids; remove {section}.vocab_size to take the tokenizer's"
            )
        if argument != "vocab_size" and given != value:
            raise ConfigError(
                f"{section}.{argument}={given} disagrees with the {tokenizer.name} tokenizer "
                f"({attribute} = {value}); remove {section}.{argument}: it comes from the "
                "tokenizer"
            )
    return out
