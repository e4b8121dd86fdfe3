"""Experiment configs: Hydra compose API over ``configs/*.yaml``, overrides, and validation.

An experiment file (``configs/hg38.yaml``) picks one entry of each group (``model/``,
``objective/``, ``data/``, ``trainer/``) in its defaults list and sets the rest. Every key is
checked before anything is built: the ``model``, ``objective`` and ``data`` sections against
the keyword arguments of the registered class they name, ``trainer`` against
``lightning.Trainer``, the others against the dataclasses below. A misspelt key fails at once
with the valid keys listed. Values are checked the same way (``genodiff.config_values``): their
type against the annotation of that field or argument, their range against the
``config_ranges`` the class declares (``TRAINER_RANGES`` for ``lightning.Trainer``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from genodiff import registry
from genodiff.atomic_files import setting_changes
from genodiff.conditioning import ConditioningConfig
from genodiff.config_values import (
    ConfigError,
    Key,
    Spec,
    callable_spec,
    class_spec,
    dataclass_spec,
    unknown_key_error,
)
from genodiff.errors import require_regular_file
from genodiff.generation_config import GenerationConfig
from genodiff.generation_config import options as generation_options
from genodiff.hub import parse_hub_id
from genodiff.named_models import close_names, named_model_folder
from genodiff.parallel import GPU_ACCELERATORS
from genodiff.plain_records import bounded_yaml_file, check_yaml_file
from genodiff.resources import resource_root
from genodiff.shipped_configs import config_folders, experiment_files
from genodiff.trainer_spec import trainer_init

GROUPS = ("model", "objective", "data", "trainer")
# Trainer arguments genodiff sets itself (from output_dir and the sections below).
TRAINER_RESERVED = ("logger", "callbacks", "default_root_dir", "plugins", "enable_checkpointing")
# The ranges of lightning.Trainer's arguments (its annotations give their types); the same
# specs as the ``config_ranges`` of genodiff's classes (see genodiff.config_values).
TRAINER_RANGES = {
    "max_steps": ">=-1; -1 = no limit",
    "max_epochs": ">=-1; -1 = no limit",
    "min_steps": ">=0",
    "min_epochs": ">=0",
    "num_nodes": ">=1",
    "accumulate_grad_batches": ">=1; 1 = no accumulation",
    "gradient_clip_val": ">=0; 0 = no clipping",
    "check_val_every_n_epoch": ">=1; null = count val_check_interval in steps across epochs",
    "val_check_interval": ">0",
    "log_every_n_steps": ">=1",
    "num_sanity_val_steps": ">=-1; -1 = all",
    "limit_train_batches": ">=0",
    "limit_val_batches": ">=0",
    "limit_test_batches": ">=0",
    "limit_predict_batches": ">=0",
    "overfit_batches": ">=0",
    "reload_dataloaders_every_n_epochs": ">=0",
}


@dataclass
class OptimConfig:
    """AdamW with linear warm-up then cosine decay to ``min_lr_ratio * lr``."""

    config_ranges: ClassVar[dict[str, str]] = {
        "lr": ">=0; 0 keeps the weights as they are",
        "betas": "[0, 1)",
        "eps": ">0",
        "weight_decay": ">=0",
        "warmup_fraction": "[0, 1); a fraction of trainer.max_steps",
        "min_lr_ratio": "[0, 1]; the final lr as a fraction of optim.lr",
    }

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    warmup_fraction: float = 0.1  # of trainer.max_steps
    min_lr_ratio: float = 0.1


@dataclass
class EMAConfig:
    """Exponential moving average of the weights, used for validation and sampling."""

    config_ranges: ClassVar[dict[str, str]] = {"decay": "[0, 1]; 0 turns the average off"}

    decay: float = 0.9999
    # decay_k = min(decay, (1 + k) / (10 + k)) at update k: short runs get a usable average.
    warmup: bool = False


@dataclass
class SamplesConfig:
    """Sequences written as FASTA to ``output_dir/samples.fa`` when training ends; its
    sampler, steps, seed and batch_size are also the trained model's generation config
    (``genodiff.generation_config.GenerationConfig.from_run_config``)."""

    config_ranges: ClassVar[dict[str, str]] = {
        "num_samples": ">=0; 0 = none",
        "length": ">=1",
        **{o.run_key: o.range for _, o in generation_options() if o.run_key and o.range},
    }

    num_samples: int = 0
    length: int = 1024
    # What a model trained with these saves as its generation config (``Model.generate``'s
    # defaults): GenerationConfig's own defaults unless the run sets them.
    steps: int = GenerationConfig.steps
    sampler: str | None = GenerationConfig.sampler  # None: the objective's first sampler
    seed: int = GenerationConfig.seed
    batch_size: int = GenerationConfig.batch_size


@dataclass
class RunConfig:
    """Top-level keys; ``model``/``objective``/``data``/``trainer`` are checked against the
    classes they name (``section_spec``)."""

    config_ranges: ClassVar[dict[str, str]] = {"seed": "[0, 4294967295]"}  # seed_everything: uint32

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
    # Class labels (a labelled data module fills conditioning.labels; see genodiff.conditioning).
    conditioning: ConditioningConfig = field(default_factory=ConditioningConfig)


def _signature_keys(fn: Any, drop: tuple[str, ...] = ()) -> list[str]:
    params = inspect.signature(fn).parameters.values()
    return [
        p.name
        for p in params
        if p.name not in ("self", *drop) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def dataclass_keys(cls: type) -> list[str]:
    """The keys a config section of dataclass ``cls`` accepts: its fields' names."""
    return [f.name for f in dataclasses.fields(cls)]


SECTION_DATACLASSES = {
    "optim": OptimConfig,
    "ema": EMAConfig,
    "samples": SamplesConfig,
    "conditioning": ConditioningConfig,
}


def section_kind(section: str) -> str:
    """The registry kind of the classes a config section names (``model``: a backbone)."""
    return "backbone" if section == "model" else section


def section_spec(cfg: DictConfig, section: str) -> Spec:
    """The keys ``section`` accepts with their types and ranges, given the class it names (for
    model/objective/data/tokenizer): that class's constructor keywords, annotations and
    ``config_ranges``; ``trainer``: ``lightning.Trainer``'s and ``TRAINER_RANGES``; the others:
    the dataclasses above."""
    if section == "trainer":  # read from Lightning's source: a config error imports none
        return callable_spec(trainer_init(), TRAINER_RANGES, drop=TRAINER_RESERVED)
    if section in ("model", "objective", "data", "tokenizer"):
        kind = section_kind(section)
        name = OmegaConf.select(cfg, f"{section}.name")
        if name is None:
            raise ConfigError(f"'{section}.name' is missing: say which {kind} to use")
        try:
            cls = registry.get(kind, name)
        except KeyError as err:
            raise ConfigError(f"{section}.name={name!r}: {err.args[0]}") from None
        # The ids and sizes the tokenizer provides may be left out (see with_tokenizer_fields).
        filled = tuple(TOKENIZER_FIELDS) if section in ("model", "objective") else ()
        spec = class_spec(cls, optional=filled)
        return Spec({"name": Key(annotation=str, default=""), **spec.keys})
    return dataclass_spec(SECTION_DATACLASSES[section])


def section_keys(cfg: DictConfig, section: str) -> list[str]:
    """The keys ``section`` accepts, given the class it names (for model/objective/data)."""
    return list(section_spec(cfg, section).keys)


def _resolved(cfg: DictConfig) -> dict[str, Any]:
    """``cfg`` as plain containers with its interpolations resolved; ConfigError naming the key
    whose interpolation fails."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        where = getattr(err, "full_key", None)
        message = str(err).splitlines()[0]
        raise ConfigError(f"{where}: {message}" if where else message) from None


@dataclass(frozen=True)
class Schema:
    """What a kind of config file may hold.

    ``top`` is the dataclass of its top-level keys; ``sections`` are the mapping sections whose
    keys are checked. ``section_spec(cfg, section)`` gives a section's keys with their types and
    ranges, so that values are checked too (None: that section is free-form); a schema that
    checks keys only gives ``section_keys(cfg, section)`` (the key names, or None) instead.
    """

    top: type
    sections: tuple[str, ...]
    section_keys: Callable[[DictConfig, str], list[str] | None] | None = None
    section_spec: Callable[[DictConfig, str], Spec | None] | None = None

    def _spec(self, cfg: DictConfig, section: str) -> Spec | None:
        return self.section_spec(cfg, section) if self.section_spec else None

    def _keys(self, cfg: DictConfig, section: str) -> list[str] | None:
        if self.section_spec is not None:
            spec = self.section_spec(cfg, section)
            return None if spec is None else list(spec.keys)
        return self.section_keys(cfg, section)

    def valid_keys_for(self, cfg: DictConfig, dotted: str) -> list[str] | None:
        """Valid keys at the level of ``dotted`` (None when that level is free-form)."""
        parts = dotted.split(".")
        if len(parts) == 1:
            return dataclass_keys(self.top)
        if parts[0] not in self.sections:
            return None
        if len(parts) == 2:
            return self._keys(cfg, parts[0])
        spec = self._spec(cfg, parts[0])  # a mapping inside a section (model.ssm_cfg.d_state)
        for part in parts[1:-1]:
            key = spec.keys.get(part) if spec is not None else None
            spec = key.nested if key is not None else None
        return None if spec is None else list(spec.keys)

    def validate(self, cfg: DictConfig) -> None:
        """Raise ConfigError for any key that no section accepts and, with ``section_spec``,
        for any value of the wrong type or out of range."""
        top = dataclass_keys(self.top)
        for key in cfg:
            if key not in top:
                raise unknown_key_error(str(key), top)
        for section in self.sections:
            value = cfg.get(section)
            if value is None:
                continue
            if not isinstance(value, DictConfig):
                raise ConfigError(f"'{section}' must be a mapping, got {value!r}")
            valid = self._keys(cfg, section)
            for key in value if valid is not None else ():
                if key not in valid:
                    raise unknown_key_error(f"{section}.{key}", valid)
        if self.section_spec is not None:
            self.check_values(cfg)

    def check_values(self, cfg: DictConfig) -> None:
        """ConfigError for the first value whose type or range does not fit (see
        ``genodiff.config_values``): the top-level keys, then every section."""
        values = _resolved(cfg)
        top = dataclass_spec(self.top)
        Spec({k: v for k, v in top.keys.items() if k not in self.sections}).check(
            "", {k: v for k, v in values.items() if k not in self.sections}
        )
        for section in self.sections:
            spec = self.section_spec(cfg, section)
            if spec is not None and values.get(section) is not None:
                spec.check(section, values[section])


TRAINING_SCHEMA = Schema(
    top=RunConfig,
    sections=(
        "model",
        "objective",
        "data",
        "tokenizer",
        "trainer",
        "optim",
        "ema",
        "samples",
        "conditioning",
    ),
    section_spec=section_spec,
)


_ASSIGNMENT = re.compile(r"^(?P<key>[A-Za-z_][\w.]*)=(?P<value>.*)$", re.S)


def _split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """The overrides that pick a config group's option (``model=mamba``), and the others. A
    group's ``null`` is quoted: Hydra reads it as None, which it refuses with a bare
    ValueError, while the name ``'null'`` is an option like any other (a missing one is said
    with the group's options, ``_hydra_message``)."""
    groups, values = [], []
    for override in overrides:
        match = _ASSIGNMENT.match(override)
        if match and match["key"] in GROUPS and "." not in match["key"]:
            if match["value"].strip().lower() == "null":
                override = f"{match['key']}='{match['value'].strip()}'"
            groups.append(override)
        else:
            values.append(override)
    return groups, values


def _search_path_override(config_file: Path, folders: list[Path]) -> str:
    """``hydra.searchpath=[...]``: ``folders`` (the copy of the working directory's
    ``configs/``, ``_working_configs``), then every folder of ``config_folders()``, besides the
    experiment file's own (which Hydra searches first), so an experiment file anywhere may pick
    the core's and the plugins' config groups (``objective: mdlm``, a plugin's ``model: ...``)
    and a shipped experiment the user's own options (``configs/model/my_model.yaml``)."""
    own = config_file.parent.resolve()
    folders = dict.fromkeys([*folders, *(folder.resolve() for folder in config_folders())])
    quoted = [
        "'file://" + str(folder).replace("\\", "\\\\").replace("'", "\\'") + "'"
        for folder in folders
        if folder != own
    ]
    return f"hydra.searchpath=[{','.join(quoted)}]"


def _working_configs(config_file: Path) -> Path | None:
    """The working directory's ``configs/`` where it is not the experiment's own folder (a
    shipped experiment, ``configs/demo.yaml`` run from a folder without it, as with a wheel)
    nor a shipped one (a checkout's root): its config group options are found after the
    experiment's own; None where there is none."""
    folder = Path("configs").resolve()
    searched = {config_file.parent.resolve(), *(f.resolve() for f in config_folders())}
    return folder if folder.is_dir() and folder not in searched else None


@contextlib.contextmanager
def _experiment_folder(source: Path) -> Iterator[Path]:
    """A temporary copy of what Hydra should read of ``source`` (the experiment's folder, or
    ``_working_configs``): its YAML files, and the YAML files in its folders named as config
    groups (``GROUPS``).

    Hydra takes every folder of its primary config folder for a config group, and an override
    ``key=VALUE`` naming one for a choice in it: a user's own folder beside the experiment
    (``pretrained/``, ``init_from/``) made ``pretrained=PATH`` fail as "Could not find
    'pretrained/PATH'". Nothing else of the folder is read (a data folder is not walked)."""
    with tempfile.TemporaryDirectory(prefix="genodiff-config-") as temporary:
        folder = Path(temporary)
        groups = [source / group for group in GROUPS if (source / group).is_dir()]
        for group in groups:
            (folder / group.name).mkdir()
        for yaml_file in itertools.chain(
            source.glob("*.yaml"), *(g.glob("*.yaml") for g in groups)
        ):
            if yaml_file.is_file() and bounded_yaml_file(yaml_file):
                shutil.copyfile(yaml_file, folder / yaml_file.relative_to(source))
        yield folder


@contextlib.contextmanager
def _config_copies(config_file: Path) -> Iterator[dict[Path, Path]]:
    """The copies Hydra reads (``_experiment_folder``), each mapped to the folder it copies:
    the experiment's folder first, then the working directory's ``configs/`` where it is
    another (``_working_configs``)."""
    check_yaml_file(config_file)  # bounded before Hydra builds it (the others: as copied)
    sources = [config_file.parent]
    working = _working_configs(config_file)
    if working is not None:
        sources.append(working)
    with contextlib.ExitStack() as stack:
        yield {stack.enter_context(_experiment_folder(source)): source for source in sources}


def _compose(
    config_file: Path, copies: dict[Path, Path], overrides: list[str], hydra_config: bool = False
) -> DictConfig:
    """The experiment ``config_file`` composed by Hydra with ``overrides``, read from the
    ``copies`` of its folder and of the working directory's configs (``_config_copies``; Hydra
    is imported here: loading a trained model reads its saved config and composes none);
    ``hydra_config``: with Hydra's own section (``hydra.runtime.choices``: the option of each
    config group the defaults list picked)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    folder, *others = copies
    search_path = _search_path_override(config_file, others)

    def said_of_the_sources(text: str) -> str:
        for copy, source in copies.items():
            text = text.replace(str(copy), str(source))
        return text

    with initialize_config_dir(config_dir=str(folder), version_base=None):
        try:
            return compose(
                config_name=config_file.stem,
                overrides=[search_path, *overrides],
                return_hydra_config=hydra_config,
            )
        except HydraException as err:
            message = said_of_the_sources(str(err).split("\nConfig search path:")[0].strip())
            raise ConfigError(_hydra_message(config_file, message)) from None
        except yaml.YAMLError as err:  # the experiment file or a group's, with its line
            where = " ".join(said_of_the_sources(str(err)).split())
            raise ConfigError(f"{config_file}: a config file is not valid YAML: {where}") from None


_OVERRIDE_KEY = re.compile(r"^[+~]*(?P<key>[^=]*)")


def run_overrides(
    overrides: Sequence[str] | None, output_dir: str | os.PathLike | None = None
) -> list[str]:
    """The overrides a run of ``genodiff.train``, ``genodiff.finetune`` or
    ``genodiff.train_classifier`` composes its config with: ``overrides``, a list of Hydra
    ``key=value`` strings (None: none), then ``output_dir`` (``~`` expanded, as
    ``genodiff.load`` expands it) as an override that reads back as the folder it names,
    whatever its characters (``runs/lr=0.002,bs=64``: quoted, not read as Hydra syntax).
    ConfigError for overrides given as one string or a mapping, or holding a non-string, and
    for an ``output_dir`` that is no path."""
    if overrides is None:
        overrides = []
    if isinstance(overrides, str):  # a list of its letters, each an override, otherwise
        raise ConfigError(f"overrides is one string: give a list of them, [{overrides!r}]")
    if isinstance(overrides, Mapping) or not isinstance(overrides, Iterable):
        raise ConfigError(
            "overrides must be a list of 'key=value' strings such as ['trainer.max_steps=20'], "
            f"got a {type(overrides).__name__}"
        )
    overrides = list(overrides)
    other = next((o for o in overrides if not isinstance(o, str)), None)
    if other is not None:
        raise ConfigError(
            f"overrides must be 'key=value' strings, one of them is of type "
            f"{type(other).__name__}: {other!r:.60}"
        )
    if output_dir is None:
        return overrides
    if not isinstance(output_dir, str | os.PathLike):
        raise ConfigError(
            f"output_dir must be a folder's path (a str or a Path), got {output_dir!r:.60}"
        )
    return [*overrides, f"output_dir={_quoted(os.path.expanduser(os.fspath(output_dir)))}"]


def _quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value that reads back as ``value``: in Hydra's
    single-quoted strings a quote is escaped with a backslash, and so is each backslash of a
    run that precedes a quote or the closing quote (other backslashes are kept as they are)."""
    escaped = re.sub(r"(\\*)('|$)", lambda m: m[1] * 2 + ("\\'" if m[2] else ""), value)
    return f"'{escaped}'"


def _refuse_hydra_keys(overrides: list[str]) -> None:
    """ConfigError for an override of a ``hydra.*`` key: genodiff composes its configs with
    Hydra's compose API and runs nothing under Hydra's ``hydra.run.dir`` or job settings, so
    such a key would be ignored (or refused in Hydra's words)."""
    for override in overrides:
        key = _OVERRIDE_KEY.match(override)["key"].strip()
        if key == "hydra" or key.startswith("hydra."):
            raise ConfigError(
                f"{override}: {key} is not part of a genodiff config (genodiff has no hydra.* "
                "keys: it composes configs with Hydra but does not run jobs through it); set "
                "where a run writes with output_dir=DIR, its name with name=NAME"
            )


_APPEND_EXISTING = re.compile(r"Could not append to config\. An item is already at '([^']+)'")


_MISSING_OPTION = re.compile(r"Could not find '(?P<group>[^']+)/(?P<option>[^']*)'")
_AVAILABLE = re.compile(r"Available options in '[^']+':(?P<options>(?:\s+\S+)+)")


def _hydra_message(config_file: Path, message: str) -> str:
    """Hydra's error in genodiff's words where it has a clearer one, on one line."""
    existing = _APPEND_EXISTING.search(message)
    if existing:
        key = existing[1]
        return (
            f"{key} is already set by {config_file.name} (or its defaults); write {key}=VALUE "
            "without a leading +"
        )
    missing, available = _MISSING_OPTION.search(message), _AVAILABLE.search(message)
    if missing and available:  # a group option that does not exist: Hydra lists one a line
        group, option, options = missing["group"], missing["option"], available["options"].split()
        close = difflib.get_close_matches(option, options, n=1)
        hint = f" (did you mean {group}={close[0]}?)" if close else ""
        return (
            f"{config_file}: {group}={option}: no such option in the config group "
            f"'{group}'{hint}; choose one of: {', '.join(options)}"
        )
    return f"{config_file}: {message}"


def _with_additions(base: DictConfig, overrides: list[str], schema: Schema) -> list[str]:
    """Turn ``trainer.max_steps=5`` into ``+trainer.max_steps=5`` when the YAML lacks the key
    but the section accepts it; reject keys that no section accepts. A key given again is
    added once, and the last value wins, as for keys the YAML holds."""
    resolved, added = [], set()
    for override in overrides:
        match = _ASSIGNMENT.match(override)
        if match is None:  # '+key=', '~key', '++key=' etc: Hydra's own syntax, checked later
            resolved.append(override)
            addition = _ASSIGNMENT.match(override.lstrip("+")) if override[:1] == "+" else None
            if addition:
                added.add(addition["key"])
            continue
        key = match["key"]
        if key in added or OmegaConf.select(base, key, default="__missing__") != "__missing__":
            resolved.append(override)
            continue
        valid = schema.valid_keys_for(base, key)
        leaf = key.split(".")[-1]
        if valid is not None and leaf not in valid:
            raise unknown_key_error(key, valid)
        resolved.append("+" + override)
        added.add(key)
    return resolved


def resolve_config_path(config: str | Path) -> Path:
    """A path to a YAML file, or a bare experiment name looked up in ./configs, then among the
    configs genodiff and its plugins ship (``config_folders``): ``demo`` and
    ``configs/demo.yaml`` work from any folder, and from a wheel."""
    if not isinstance(config, str | os.PathLike):
        raise ConfigError(
            f"config must be a YAML file's path or a shipped config's name (demo), got "
            f"{config!r:.60}"
        )
    path = Path(config)
    yaml = path.with_suffix(".yaml")
    candidates = [path, yaml, Path("configs") / yaml]
    if not path.is_absolute():
        shipped = yaml.relative_to("configs") if yaml.parts[0] == "configs" else yaml
        candidates += [folder / shipped for folder in config_folders()]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    if path.exists():  # a folder, a FIFO, a device: said as such, not "not found"
        require_regular_file(path, "config file")
    looked_at = ", ".join(map(str, dict.fromkeys(candidates)))  # an absolute path once
    names = sorted(experiment_files())
    shipped_names = ", ".join(names)
    close = difflib.get_close_matches(yaml.stem, names, n=1)
    # a mistyped shipped name as typed (hg38_sed, configs/hg38_sed.yaml), else the bare name
    typed = str(path.parent) in (".", "configs")
    hint = ""
    if close:
        hint = f": did you mean {path.with_name(close[0] + path.suffix) if typed else close[0]}?"
    raise ConfigError(
        f"config file {str(config)!r} not found{hint} (looked at {looked_at}); pass a path such as "
        f"configs/demo.yaml, or the name of an experiment that genodiff or an installed plugin "
        f"ships ({shipped_names}). A plugin's experiments are found only when it is installed: "
        "the text plugin's (text_demo, lm1b, ...) with pip install genodiff-text (from a "
        "checkout: pip install -e plugins/genodiff-text)"
    )


def project_root(config_file: Path) -> Path:
    """The folder relative data paths are resolved against: the parent of ``configs/``."""
    return config_file.parent.parent if config_file.parent.name == "configs" else Path.cwd()


def resolve_path(path: str, root: Path) -> str:
    """``path`` as given if it exists from the working directory, else relative to ``root``
    where it is there, else among the files genodiff ships (``genodiff.resources``: the
    ``data/...`` a shipped config names, as from an experiment file that extends one); a path
    found nowhere is the one relative to ``root``, or to the working directory for a config
    genodiff or a plugin ships (``home_of_missing_files``)."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return str(candidate.resolve())
    for folder in (root, resource_root()):
        if (folder / candidate).exists():
            return str((folder / candidate).resolve())
    return str((home_of_missing_files(root) / candidate).resolve())


def home_of_missing_files(root: Path) -> Path:
    """Where a data path that exists nowhere yet belongs (the files a message says to
    download there): relative to ``root``, the folder of the experiment's ``configs/``, unless
    that folder is one genodiff or a plugin ships (an installed package's, not the user's to
    write in), then the working directory, which ``resolve_path`` reads first."""
    shipped = {folder.resolve().parent for folder in config_folders()}
    return Path.cwd() if root.resolve() in shipped else root


def resolve_checkpoint_reference(reference: str, root: Path) -> str:
    """``init_from=`` / ``pretrained=``: as ``resolve_path``, except that a reference found at
    neither place that names a model (``genodiff.named_models``), spells a Hugging Face Hub
    id (``org/name[@revision]``) or is spelled close to a model's name (a mistyped one: its
    error then says which name was meant) is kept as it is, for ``genodiff.hub`` to resolve."""
    resolved = resolve_path(reference, root)
    if Path(resolved).exists():
        return resolved
    if named_model_folder(reference) is not None or parse_hub_id(reference) is not None:
        return reference
    return reference if close_names(reference) else resolved


def compose_config(
    config: str | Path, overrides: list[str] | None, schema: Schema
) -> tuple[DictConfig, Path]:
    """Compose ``config`` with Hydra-style ``overrides``, add the schema's defaults for the
    non-group keys and validate; returns the config and the resolved YAML path."""
    config_file = resolve_config_path(config)
    _refuse_hydra_keys(list(overrides or []))
    group_overrides, value_overrides = _split_overrides(list(overrides or []))
    with _config_copies(config_file) as copies:
        base = _compose(config_file, copies, group_overrides)
        additions = _with_additions(base, value_overrides, schema)
        cfg = _compose(config_file, copies, group_overrides + additions)
    OmegaConf.set_struct(cfg, False)
    defaults = dataclasses.asdict(schema.top())  # (not OmegaConf.structured: no union types)
    cfg = OmegaConf.merge({k: v for k, v in defaults.items() if k not in GROUPS}, cfg)
    schema.validate(cfg)
    _refuse_an_empty_output_dir(cfg)
    return cfg, config_file


def section_as_written(
    config: str | Path, overrides: Sequence[str] | None, group: str, schema: Schema
) -> Any:
    """The config group ``group`` (``model``) as the files of ``config`` write it and
    ``overrides`` set it, without the option the defaults list picks for it (the ``model:
    caduceus_ph`` of configs/genomic_benchmarks.yaml): what a run was told of that section
    beyond its default, resolved to plain values. An override that picks an option
    (``model=mamba``) counts as written. None where neither the files nor the overrides set it."""
    config_file = resolve_config_path(config)
    overrides = list(overrides or [])
    group_overrides, value_overrides = _split_overrides(overrides)
    picked_by_user = any(_OVERRIDE_KEY.match(o)["key"].strip() == group for o in overrides)
    with _config_copies(config_file) as copies:
        if not picked_by_user:
            choices = _compose(config_file, copies, [], hydra_config=True).hydra.runtime.choices
            if choices.get(group) is not None:  # the defaults list's option, left out
                group_overrides = [f"~{group}", *group_overrides]
        cfg = _compose(config_file, copies, group_overrides)
        # keys of the section are added where the files leave it out (its keys are checked
        # when the run's whole config is composed)
        unchecked = dataclasses.replace(schema, sections=())
        additions = _with_additions(cfg, value_overrides, unchecked)
        if additions:
            cfg = _compose(config_file, copies, group_overrides + additions)
    return _resolved(cfg).get(group) if cfg.get(group) is not None else None


def _refuse_an_empty_output_dir(cfg: DictConfig) -> None:
    """ConfigError for an ``output_dir`` that is an empty name (an unset variable in
    ``output_dir=$OUT``): ``Path("")`` is the working directory, which the run would fill
    with its checkpoints, logs and samples; ``genodiff.load`` and ``save_pretrained`` refuse
    the same name."""
    if cfg.get("output_dir") == "":
        raise ConfigError(
            "output_dir is an empty name, which would put the run's files in the working "
            'directory; name a folder ("." for the working directory)'
        )


def load_config(config: str | Path, overrides: list[str] | None = None) -> DictConfig:
    """Compose a training config with ``overrides``, validate it, resolve data paths."""
    cfg, config_file = compose_config(config, overrides, TRAINING_SCHEMA)
    root = project_root(config_file)
    resolve_data_paths(cfg, root)
    if cfg.get("init_from"):
        cfg.init_from = resolve_checkpoint_reference(cfg.init_from, root)
    OmegaConf.resolve(cfg)
    check_training_config(cfg)
    return cfg


def resolve_data_paths(cfg: DictConfig, root: Path) -> None:
    """Resolve, in place, the ``data`` keys that the data module declares paths
    (``path_keys``; a mapping of paths such as ``data.fasta_by_label`` entry by entry), as
    ``resolve_path`` does."""
    for key in registry.get("data", cfg.data.name).path_keys:
        value = cfg.data.get(key)
        if isinstance(value, DictConfig):  # a mapping of paths (data.fasta_by_label)
            for name in value:
                value[name] = resolve_path(value[name], root)
        elif value:
            cfg.data[key] = resolve_path(value, root)


def check_training_config(cfg: DictConfig) -> None:
    """The checks that involve several keys or this machine (each key's own type and range
    are the schema's): a GPU accelerator where none is visible, ``trainer.devices`` naming no
    device, and ``init_from`` with a ``ckpt_path`` that starts a new ``output_dir`` from
    another run."""
    accelerator = (cfg.get("trainer") or {}).get("accelerator")
    if isinstance(accelerator, str) and accelerator.lower() in GPU_ACCELERATORS:
        import torch

        if not torch.cuda.is_available():
            build = "; this torch build has no CUDA" if torch.version.cuda is None else ""
            raise ConfigError(
                f"trainer.accelerator: {accelerator!r} asks for a GPU, but no GPU is visible "
                f"(torch.cuda.is_available() is false{build}); use trainer.accelerator=cpu, "
                "or trainer.accelerator=auto to take a GPU when there is one"
            )
    check_devices(cfg.get("trainer") or {})
    if cfg.get("init_from") and cfg.get("ckpt_path") not in (None, "last"):
        checkpoint = Path(cfg.ckpt_path).expanduser().resolve()
        if not checkpoint.is_relative_to(Path(cfg.output_dir).expanduser().resolve()):
            raise ConfigError(
                f"init_from: both init_from={cfg.init_from} (start from pretrained backbone "
                f"weights) and ckpt_path={cfg.ckpt_path} (continue that run: weights, "
                "optimizer, step) give this run its starting weights; keep one of the two "
                "(resuming a run in its own output_dir with ckpt_path=last may keep init_from)"
            )


def check_devices(trainer: Any) -> None:
    """ConfigError for a ``trainer.devices`` that names no device: 0, an empty list, or a
    number below -1 (-1 means every device)."""
    devices = trainer.get("devices")
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    listed = isinstance(devices, list | tuple | ListConfig)
    counted = type(devices) is int
    if (listed and len(devices) == 0) or (counted and devices < 1 and devices != -1):
        raise ConfigError(
            f"trainer.devices={'[]' if listed else devices} names no device to train on; set "
            "trainer.devices=1 (or N devices, -1 for all of them, a list of device indices, "
            "or auto)"
        )


# Constructor arguments that the tokenizer provides: argument -> tokenizer attribute. Plaid
# calls its modelled ids ``token_ids``; every sampler's drawable ids are ``sample_ids``; an
# RC-equivariant backbone's complement is the tokenizer's ``complement_map`` (None: it has none).
TOKENIZER_FIELDS = {
    "vocab_size": "vocab_size",
    "mask_id": "mask_id",
    "pad_id": "pad_id",
    "bos_id": "bos_id",
    "sample_ids": "sample_ids",
    "token_ids": "sample_ids",
    "complement_map": "complement_map",
}


def completed_model_config(model_config: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    """A checkpoint's saved ``model`` section with the fields ``tokenizer`` provides added where
    it has none, so that checkpoints saved before the tokenizer provided one
    (``complement_map``) build as before; the saved values win (they were checked in training)."""
    cls = registry.get("backbone", model_config["name"])
    return {**with_tokenizer_fields("model", cls, {}, tokenizer), **model_config}


def backbone_differences(
    first: Mapping[str, Any], second: Mapping[str, Any], labels: tuple[str, str]
) -> list[str]:
    """``KEY: A <labels[0]>, B <labels[1]>`` for each setting that two backbone configs both
    hold with different values (``atomic_files.setting_changes``). Keys only one of them holds
    (at any depth: ``ssm_cfg: {}`` is the defaults, as a spelled-out ``ssm_cfg`` may be) and
    the ids and sizes a tokenizer fills in (``TOKENIZER_FIELDS``, which configs spell in more
    than one way: a complement map as a list or as a mapping) are not compared."""
    shared = {key: v for key, v in first.items() if key in second and key not in TOKENIZER_FIELDS}
    return setting_changes(*_shared_keys(shared, second), labels=labels)


def _shared_keys(first: Any, second: Any) -> tuple[Any, Any]:
    """``first`` and ``second`` restricted, mapping by mapping, to the keys both hold."""
    if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
        return first, second
    pairs = {key: _shared_keys(first[key], second[key]) for key in first if key in second}
    return {k: a for k, (a, _) in pairs.items()}, {k: b for k, (_, b) in pairs.items()}


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
