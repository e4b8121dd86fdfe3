"""``genodiff export`` and ``Model.save_pretrained``: a trained generative model as a
Hugging-Face-format folder (``genodiff.checkpoints.folders``) with its run record.

The folder holds the backbone files (config.json, model.safetensors, tokenizer.json) and
genodiff.json: the run's full config, which weights these are (``ema``: the average that
validation and sampling use; ``raw``: the trained ones), and where they come from (the step,
epoch, tokens seen and data digest a training checkpoint recorded). ``genodiff.load``, every
command and the Hub read it back like the checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from torch import nn

from genodiff.checkpoints.folders import (
    CONFIG_FILE,
    RUN_RECORD_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    _folder_files,
    _json_writer,
    _write_folder,
    as_trained,
    output_folder,
)
from genodiff.checkpoints.load import WEIGHTS_DIGEST_KEY, load_model
from genodiff.checkpoints.weights import CheckpointError
from genodiff.config import completed_model_config
from genodiff.errors import InputValueError, require_flag
from genodiff.model import GenerativeModel
from genodiff.progress import Progress
from genodiff.tokenizers import Tokenizer

# The sets of weights a training checkpoint holds: the average and the trained ones.
WEIGHT_SETS = ("ema", "raw")


def export_model(
    source: GenerativeModel | str | Path,
    out_dir: str | Path,
    weights: Literal["ema", "raw"] = "ema",
    overwrite: bool = False,
    progress: Progress | None = None,
    *,
    record_entries: Mapping[str, Any] | None = None,
) -> Path:
    """Write a trained model into the folder ``out_dir``: ``source`` is the model
    (``Model.save_pretrained``), or a genodiff training checkpoint (.ckpt of ``genodiff train``,
    read through the one reader, ``load_model``: ``genodiff export``). ``weights`` "ema" (the
    average) or "raw" (the trained weights); a model loaded from an export folder holds one
    set, written as that set. The folder's other files are kept; ``overwrite`` replaces a
    model saved there before, all of its files (``folders.OWNED_FILES``). ``progress`` hears
    of each stage. ``record_entries``: genodiff.json entries written instead of the model's
    (``Model.save_pretrained(portable_data=True)``: its config with no path of this machine
    and the records of its data files, see ``genodiff.data.training_files.portable_record``).
    Returns the folder."""
    _check_weights(weights)
    overwrite = require_flag(overwrite, "overwrite")
    out_dir = output_folder(out_dir)
    _check_out_dir(out_dir)
    if not isinstance(source, GenerativeModel):
        _check_checkpoint_path(Path(source))
        if progress is not None:
            progress.note(f"reading {source}")
        source = load_model(source)
    model = source
    _check_backbone_holds_the_model(model)
    # Where it was read from and its weights' digest describe this copy, not the export.
    provenance = {
        k: v for k, v in model.provenance.items() if k not in ("source", WEIGHTS_DIGEST_KEY)
    }
    held = provenance.pop("weights", None)  # an exported model holds one set
    if held is not None and weights != held:
        raise CheckpointError(
            f"{model.provenance.get('source', 'this model')} holds only its {held} weights "
            f"(an export folder): save them with weights={held!r}, or export the run's .ckpt "
            f"for its {weights} weights",
            parameter="weights",
        )
    if held is None and weights == "ema" and model.ema is None:
        raise CheckpointError(
            "the run was trained without EMA (ema.decay=0): it has no averaged weights; "
            "export its trained ones (weights='raw')",
            parameter="weights",
        )
    backbone = model.eval_backbone if weights == "ema" else model.backbone
    record = {"config": model.config, "weights": weights, **provenance, **(record_entries or {})}
    if progress is not None:
        progress.note(f"writing {out_dir}")
    return _write_export(backbone, record["config"], model.tokenizer, record, out_dir, overwrite)


def _check_weights(weights: str) -> None:
    if weights not in WEIGHT_SETS:
        raise InputValueError(
            f"weights must be 'ema' or 'raw', got {weights!r}", parameter="weights"
        )


def _check_backbone_holds_the_model(model: GenerativeModel) -> None:
    """An input error, before anything is written, for a model whose objective has learned
    parameters of its own (Plaid's embeddings and noise schedule): a folder holds a backbone,
    so it would load as nothing (``load._load_exported_weights`` refuses it)."""
    if any(True for _ in model.objective.parameters()):
        raise InputValueError(
            f"the {model.config['objective']['name']} objective has learned parameters of its "
            "own, which an export folder (a backbone's weights) cannot hold; sample, evaluate "
            "and share the run's .ckpt instead"
        )


def _model_config(run_config: dict[str, Any], tokenizer: Tokenizer) -> dict[str, Any]:
    """The backbone section of ``run_config`` as it was trained (tokenizer ids and sizes)."""
    return as_trained(completed_model_config(run_config["model"], tokenizer), run_config)


def _write_export(
    backbone: nn.Module,
    run_config: dict[str, Any],
    tokenizer: Tokenizer,
    record: dict[str, Any],
    out_dir: Path,
    overwrite: bool,
) -> Path:
    """The backbone files and genodiff.json (``record``), written together."""
    files = {
        RUN_RECORD_FILE: _json_writer(record),
        **_folder_files(backbone, _model_config(run_config, tokenizer), tokenizer),
    }
    return _write_folder(out_dir, files, overwrite)


def _check_out_dir(out_dir: Path) -> None:
    """An input error, before anything is read or written, for an output folder that is a
    file."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputValueError(
            f"{out_dir} is a file; export writes a folder ({CONFIG_FILE}, {WEIGHTS_FILE}, "
            f"{TOKENIZER_FILE}, {RUN_RECORD_FILE}): name a new folder, or one to add them to",
            parameter="out",
        )


def _check_checkpoint_path(ckpt_path: Path) -> None:
    """An input error, before anything is read, for a checkpoint that is a folder (an
    exported one needs no export)."""
    if ckpt_path.is_dir():
        if (ckpt_path / RUN_RECORD_FILE).is_file():
            raise InputValueError(
                f"{ckpt_path} is already a folder that genodiff export wrote (it holds "
                f"{RUN_RECORD_FILE}); sample, evaluate or upload it as it is, or export the "
                "run's .ckpt",
                parameter="checkpoint",
            )
        raise InputValueError(
            f"{ckpt_path} is a folder; export takes a training checkpoint file, e.g. "
            f"{ckpt_path / 'checkpoints' / 'last.ckpt'}",
            parameter="checkpoint",
        )
