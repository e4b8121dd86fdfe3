"""``genodiff info PATH``: what a checkpoint holds, read without running it.

PATH is anything ``load_model`` (so ``genodiff sample``) or ``load_pretrained`` takes: a training
checkpoint (.ckpt), a folder from ``genodiff export`` (its genodiff.json records the run), any
Hugging-Face-format checkpoint folder (backbone only: no objective, step or data recorded), or a
Hub id ``org/name[@revision]`` of one of these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from genodiff import hub, registry
from genodiff.checkpoints.folders import (
    CONFIG_FILE,
    RUN_RECORD_FILE,
    read_backbone_config,
    read_json_object,
    read_run_record,
)
from genodiff.checkpoints.io import RUN_STATE_KEY
from genodiff.checkpoints.load import (
    CLASSIFIER,
    CLASSIFIER_WEIGHTS_PREFIX,
    GENERATOR,
    RUN_FILES,
    StoredCheckpoint,
    locate,
    open_checkpoint,
)
from genodiff.conditioning import class_names
from genodiff.config import completed_model_config
from genodiff.model import backbone_size, build_objective, complete_config
from genodiff.tokenizers import Tokenizer, load_tokenizer

NOT_RECORDED = "not recorded"
# The rows of ``genodiff info`` that only a generative model has.
GENERATIVE_ROWS = ("objective", "tokens seen", "data", "data digest")


@dataclass
class CheckpointInfo:
    """The facts ``genodiff info`` prints; None where the checkpoint does not record them."""

    source: str
    path: str
    holds: str
    backbone: str
    # The learned parameters of the model the checkpoint holds (one copy: no average), and
    # by part: the backbone's, and a classifier's head or an objective's own (Plaid) beside it.
    parameters: int
    parameter_parts: dict[str, int]
    tokenizer: str | None
    config: dict[str, Any]
    objective: str | None = None
    step: int | None = None
    epoch: int | None = None
    # Counted during training; estimated from the config for checkpoints without that record.
    tokens_seen: int | None = None
    tokens_seen_from: str | None = None
    tokens_seen_counted: bool = False
    data: str | None = None
    data_digest: str | None = None
    # A class-conditional run's class names in label-id order (genodiff.conditioning), or a
    # classifier's; only a class-conditional generator also has the null label (p(x)).
    classes: list[str] | None = None
    null_label: bool = False
    # A classifier (fine-tuned or for guidance): the rows of a generative run (GENERATIVE_ROWS)
    # do not apply to it, and ``describe`` leaves them out rather than say "not recorded".
    classifier: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _parameters_row(self) -> str:
        """The total, and its parts when the backbone is not all of it."""
        parts = [f"{name} {count:,}" for name, count in self.parameter_parts.items() if count]
        return f"{self.parameters:,}" + (f" ({', '.join(parts)})" if len(parts) > 1 else "")

    def describe(self) -> str:
        def shown(value: Any) -> str:
            return NOT_RECORDED if value is None else str(value)

        step = shown(self.step) + (f" (epoch {self.epoch})" if self.epoch is not None else "")
        tokens = NOT_RECORDED
        if self.tokens_seen is not None:
            about = "" if self.tokens_seen_counted else "~"
            tokens = f"{about}{self.tokens_seen:,} ({self.tokens_seen_from})"
        # Over each file's bytes as read (compressed): not a model card's content sha256
        digest = f"{self.data_digest} (of the files' bytes)" if self.data_digest else NOT_RECORDED
        null = " (+ the null label: p(x))" if self.null_label else ""
        rows = [
            ("source", self.source if self.source == self.path else f"{self.source} ({self.path})"),
            ("holds", self.holds),
            ("objective", shown(self.objective)),
            ("backbone", self.backbone),
            ("parameters", self._parameters_row()),
            ("step", step),
            ("tokens seen", tokens),
            ("data", shown(self.data)),
            ("data digest", digest),
            *([("classes", ", ".join(self.classes) + null)] if self.classes else []),
            ("tokenizer", self.tokenizer or "none stored (DNA by default)"),
        ]
        if self.classifier:
            rows = [(name, value) for name, value in rows if name not in GENERATIVE_ROWS]
        lines = [f"{name + ':':<13}{value}" for name, value in rows]
        config = OmegaConf.to_yaml(OmegaConf.create(self.config)).rstrip()
        return "\n".join([*lines, "config:", *("  " + line for line in config.splitlines())])


def inspect_checkpoint(reference: str | Path) -> CheckpointInfo:
    """What ``reference`` holds (see the module docstring)."""
    path = hub.resolve(reference, RUN_FILES)
    if path.is_dir() and (path / CONFIG_FILE).is_file():  # any backbone folder
        return _folder_info(str(reference), path)
    return _checkpoint_info(str(reference), locate(path))  # a .ckpt, a run's folder


def _checkpoint_info(source: str, path: Path) -> CheckpointInfo:
    stored = open_checkpoint(path)  # any kind genodiff writes, read safely
    checkpoint, record = stored.content, stored.record
    step, epoch = checkpoint.get("global_step"), checkpoint.get("epoch")
    if stored.kind == GENERATOR:
        config = record
        backbone = completed_model_config(config["model"], stored.tokenizer)
        holds, facts = (
            "training checkpoint (genodiff train)",
            _run_facts(config, step, epoch, checkpoint.get(RUN_STATE_KEY, {})),
        )
        objective = complete_config(config, stored.tokenizer)["objective"]
        beside = {"objective": _parameters(build_objective(objective))}
    elif stored.kind == CLASSIFIER:  # the record holds its backbone and classes
        config, backbone = checkpoint["hyper_parameters"]["config"], dict(record["model"])
        names = list(record["class_names"])
        holds = f"{record['kind']} guidance classifier of {', '.join(names)} (genodiff classifier)"
        facts = {"classes": names, "step": step, "epoch": epoch}
        beside = {"head": _head_parameters(stored)}
    else:  # a fine-tuned classifier: its record is all it has of a config
        config, backbone = record, dict(record["backbone"])
        holds = f"classifier fine-tuned on {record['task']} (genodiff finetune)"
        facts = {"classes": list(record["classes"]), "step": step, "epoch": epoch}
        beside = {"head": _head_parameters(stored)}
    shown = dict(backbone)
    parts = {"backbone": backbone_size(backbone)[0], **beside}  # counted, not allocated
    return CheckpointInfo(
        source=source,
        path=str(path),
        holds=holds,
        backbone=_describe_backbone(shown.pop("name"), shown),
        parameters=sum(parts.values()),
        parameter_parts=parts,
        tokenizer=_describe_tokenizer(stored.tokenizer),
        config=config,
        classifier=stored.kind != GENERATOR,
        **facts,
    )


def _folder_info(source: str, path: Path) -> CheckpointInfo:
    name, layout, model_config = read_backbone_config(path)  # its fields checked
    reference_config = read_json_object(path / CONFIG_FILE)
    parameters = backbone_size({"name": name, **model_config})[0]
    facts: dict[str, Any] = dict(
        source=source,
        path=str(path),
        holds=f"checkpoint folder ({layout.name} layout), backbone only",
        backbone=_describe_backbone(name, model_config),
        parameters=parameters,
        parameter_parts={"backbone": parameters},
        tokenizer=_describe_tokenizer(load_tokenizer(path)),
        config=reference_config,
    )
    record_path = path / RUN_RECORD_FILE
    if record_path.is_file():  # exported by genodiff: the run is recorded too
        record = read_run_record(path)
        facts.update(
            holds=f"checkpoint folder ({layout.name} layout) exported from "
            f"{record.get('exported_from') or 'a model built in memory'}, "
            f"{record.get('weights')} weights",
            config=record["config"],
            **_run_facts(record["config"], record.get("global_step"), record.get("epoch"), record),
        )
    return CheckpointInfo(**facts)


def _run_facts(
    config: dict[str, Any], step: int | None, epoch: int | None, run: dict[str, Any]
) -> dict[str, Any]:
    """Objective, step, tokens seen and data of a training run: ``run`` is what the checkpoint
    recorded (``tokens_seen``, ``data_digest``); tokens are estimated from the config when the
    checkpoint predates that record."""
    data = config.get("data", {})
    files = [f"{key}={data[key]}" for key in _data_file_keys(data.get("name")) if data.get(key)]
    classes = class_names(config)
    facts: dict[str, Any] = {
        "classes": classes,
        "null_label": classes is not None,
        "objective": config.get("objective", {}).get("name"),
        "step": step,
        "epoch": epoch,
        "data": ", ".join([data["name"], *files]) if data.get("name") else None,
        "data_digest": run.get("data_digest"),
    }
    if run.get("tokens_seen") is not None:
        facts["tokens_seen"] = run["tokens_seen"]
        facts["tokens_seen_from"] = "counted during training, every process"
        facts["tokens_seen_counted"] = True
        return facts
    batch, length = data.get("batch_size"), data.get("max_length")
    if step is None or not batch or not length:
        return facts
    trainer = config.get("trainer", {})
    accumulate = trainer.get("accumulate_grad_batches") or 1
    devices = trainer.get("devices")
    known_devices = isinstance(devices, int) and devices > 0
    world = devices if known_devices else 1
    parts = [f"{step:,} steps", f"batch {batch}", f"{length:,}-token windows"]
    parts += [f"{accumulate} accumulated batches"] if accumulate > 1 else []
    parts += [f"{world} devices"] if world > 1 else []
    facts["tokens_seen"] = step * batch * accumulate * length * world
    facts["tokens_seen_from"] = " x ".join(parts) + ("" if known_devices else ", per device")
    return facts


def _data_file_keys(name: str | None) -> tuple[str, ...]:
    """The ``data:`` keys naming the files of the data module ``name`` (``DataModule.
    data_file_keys``); none when the module is unknown here (its plugin is not installed)."""
    try:
        return registry.get("data", name).data_file_keys if name else ()
    except (KeyError, ImportError):
        return ()


def _describe_backbone(name: str, config: dict[str, Any]) -> str:
    scalars = [f"{k}={v}" for k, v in config.items() if isinstance(v, int | float | str | bool)]
    return f"{name} ({', '.join(scalars)})" if scalars else name


def _describe_tokenizer(tokenizer: Tokenizer | None) -> str | None:
    if tokenizer is None:
        return None
    return f"{tokenizer.name} ({tokenizer.domain}, {tokenizer.vocab_size} ids)"


def _parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _head_parameters(stored: StoredCheckpoint) -> int:
    """The parameters of a classifier checkpoint's head: the classifier's stored tensors
    beyond its backbone's (a head holds no buffers)."""
    weights = stored.weights(CLASSIFIER_WEIGHTS_PREFIX)
    return sum(t.numel() for name, t in weights.items() if not name.startswith("backbone."))
