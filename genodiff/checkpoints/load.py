"""``load_model``: the trained model a checkpoint reference names, ready to sample and score.

Every command that uses a trained model (``genodiff sample``, ``eval``, ``info``, the metrics,
fine-tuning's ``pretrained=``, the notebook) loads it here, as a plain ``GenerativeModel``:
no Lightning module is built.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from genodiff import hub
from genodiff.checkpoints.folders import (
    FOLDER_FILES,
    RUN_RECORD_FILE,
    load_pretrained,
    read_run_record,
)
from genodiff.checkpoints.io import CLASSIFIER_RECORD_KEY, read_checkpoint
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.model import GenerativeModel
from genodiff.tokenizers import load_tokenizer, tokenizer_from_checkpoint

# What a training run may be stored as in a folder or Hub repository: a folder that
# ``genodiff export`` wrote (backbone files + genodiff.json) or a training checkpoint (*.ckpt).
RUN_FILES = (*FOLDER_FILES, RUN_RECORD_FILE, "*.ckpt")


def load_model(reference: str | Path, map_location: str | torch.device = "cpu") -> GenerativeModel:
    """A ``genodiff train`` run's model with its tokenizer, in eval mode on ``map_location``.
    ``reference`` is

    - a training checkpoint (.ckpt);
    - a folder that ``genodiff export`` wrote (its genodiff.json holds the run's config), or a
      folder holding a .ckpt (``last.ckpt`` when there are several);
    - a Hugging Face Hub id ``org/name[@revision]`` of a repository holding either of those
      (``genodiff.hub``; a local path of the same spelling wins).
    """
    source = hub.resolve(reference, RUN_FILES)
    if source.is_dir() and (source / RUN_RECORD_FILE).is_file():
        model = _load_exported_run(source)
    else:
        source = checkpoint_file(source)
        model = _load_training_checkpoint(source, map_location)
    check_finite_weights(model, source)
    return model.to(map_location).eval()


def check_finite_weights(model: nn.Module, source: Path) -> None:
    """InputValueError naming ``source`` and the first tensor of ``model`` that holds a NaN or
    an infinity: such weights give NaN scores and meaningless samples."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise InputValueError(
                f"{source}: the weights are not finite ({name} holds NaN or inf): the run "
                "diverged or the file is damaged; use another checkpoint, e.g. the previous one"
            )


def checkpoint_file(source: Path) -> Path:
    """``source`` when it is a file, else the training checkpoint in that folder: its
    ``last.ckpt``, or its only ``*.ckpt``."""
    if source.is_file():
        return source
    if (source / "last.ckpt").is_file():
        return source / "last.ckpt"
    found = sorted(p.name for p in source.glob("*.ckpt"))
    if len(found) == 1:
        return source / found[0]
    raise InputFileNotFoundError(
        f"{source} holds no genodiff.json (a folder from genodiff export) and "
        + (f"several checkpoints ({', '.join(found)}): name one" if found else "no *.ckpt")
    )


def _load_training_checkpoint(path: Path, map_location: str | torch.device) -> GenerativeModel:
    checkpoint = read_checkpoint(path, map_location)  # one clear error for a damaged file
    if CLASSIFIER_RECORD_KEY in checkpoint:
        raise InputValueError(
            f"{path} is a guidance classifier (genodiff classifier), not a generative model; "
            "give it to genodiff sample as --classifier"
        )
    model = GenerativeModel(
        checkpoint["hyper_parameters"]["config"], tokenizer_from_checkpoint(checkpoint)
    )
    model.load_state_dict(checkpoint["state_dict"])
    return model


def _load_exported_run(folder: Path) -> GenerativeModel:
    """The run a ``genodiff export`` folder holds: its config from genodiff.json, the exported
    backbone as both the trained and the averaged weights."""
    record = read_run_record(folder)  # one clear error for a malformed or edited record
    model = GenerativeModel(record["config"], load_tokenizer(folder))
    if any(True for _ in model.objective.parameters()):
        raise InputValueError(
            f"{folder}: the {record['config']['objective']['name']} objective has learned "
            "parameters of its own, which an exported folder does not hold; load the run's .ckpt"
        )
    weights = load_pretrained(folder).state_dict()
    model.backbone.load_state_dict(weights)
    model.eval_backbone.load_state_dict(weights)
    return model
