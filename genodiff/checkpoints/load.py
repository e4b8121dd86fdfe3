"""One loader for every checkpoint genodiff writes: ``open_checkpoint``, and ``load_model`` on it.

Three kinds of checkpoint, told apart by what they hold:

- a generative model (``genodiff train``): ``hyper_parameters.config``, the run's config; or a
  folder that ``genodiff export`` wrote (its genodiff.json holds the config);
- a guidance classifier (``genodiff classifier``): the ``genodiff_classifier`` record;
- a fine-tuned classifier (``genodiff finetune``): ``hyper_parameters.finetuned_classifier``.

``open_checkpoint`` resolves a reference (a file; a run's output folder, its checkpoints folder or
an exported folder; a Hugging Face Hub id), reads it through the CRC-checked, weights_only reader
(``io.read_checkpoint_file``: no code in a file runs), tells its kind, copies what it records
(``RECORD_KEYS``: its config, ...) as bounded trees of plain values before anything walks them
(``plain_records.plain_tree``; an exported folder's JSON likewise), rebuilds its tokenizer and
refuses, in one line, a checkpoint of another kind than the one asked for, saying what it is and
where it goes. Each kind's builder loads its weights with ``weights.load_weights`` (strict, and
finite): ``load_model`` here (every command that uses a trained model: ``genodiff sample``,
``eval``, the metrics, fine-tuning's ``pretrained=``, the notebook; a plain ``GenerativeModel``,
no Lightning module), ``genodiff.classifiers.load_classifier`` and
``genodiff.finetuning.trained.load_finetuned_classifier``, so all three take the same references
and check them alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from genodiff import hub
from genodiff.checkpoints.epochs import reopen_cut_epoch
from genodiff.checkpoints.folders import (
    FOLDER_FILES,
    RUN_RECORD_FILE,
    check_run_config,
    load_pretrained,
    read_run_record,
    tensors_digest,
)
from genodiff.checkpoints.io import (
    CLASSIFIER_RECORD_KEY,
    FINETUNED_RECORD_KEY,
    RUN_STATE_KEY,
    read_checkpoint_file,
)
from genodiff.checkpoints.weights import load_weights
from genodiff.errors import InputFileNotFoundError, InputValueError, require_regular_file
from genodiff.model import GenerativeModel
from genodiff.plain_records import plain_tree
from genodiff.randomness.kept import global_random_state_kept
from genodiff.tokenizers import (
    CHECKPOINT_KEY,
    Tokenizer,
    build_tokenizer,
    load_tokenizer,
    tokenizer_from_checkpoint,
)

# A run's checkpoints, in its output folder.
CHECKPOINT_FOLDER = "checkpoints"
# What a checkpoint may be stored as in a folder or Hub repository: a folder that
# ``genodiff export`` wrote (backbone files + genodiff.json) or a checkpoint file (*.ckpt).
RUN_FILES = (*FOLDER_FILES, RUN_RECORD_FILE, "*.ckpt")

GENERATOR, CLASSIFIER, FINETUNED = "generator", "classifier", "finetuned"
# Where a classifier checkpoint (either kind) stores the classifier's weights: the training
# module's attribute that holds it.
CLASSIFIER_WEIGHTS_PREFIX = "classifier."

# What genodiff reads of a checkpoint file besides its tensors: each is checked to be a bounded
# tree of plain values (``plain_records.plain_tree``) before anything walks it.
RECORD_KEYS = (
    "hyper_parameters",
    CLASSIFIER_RECORD_KEY,
    RUN_STATE_KEY,
    CHECKPOINT_KEY,
    "global_step",
    "epoch",
)


@dataclass(frozen=True)
class Kind:
    """A kind of checkpoint: what a file of it is, where it goes, and the argument
    (``parameter``) that takes it there."""

    what: str
    use: str
    parameter: str


# model.provenance's key of ``weights_digest``: what the samples' provenance records
# (``genodiff.sample_formats.SamplingRun.weights_crc32``).
WEIGHTS_DIGEST_KEY = "weights_crc32"

KINDS = {
    GENERATOR: Kind(
        "a generative model (genodiff train)",
        "sampling and scoring take it as their checkpoint",
        "checkpoint",
    ),
    CLASSIFIER: Kind(
        "a guidance classifier (genodiff classifier)",
        "guided sampling takes it as its classifier",
        "classifier",
    ),
    FINETUNED: Kind(
        "a fine-tuned classifier (genodiff finetune)",
        "evaluate_samples takes it as its oracle",
        "oracle",
    ),
}


@dataclass(frozen=True)
class StoredCheckpoint:
    """A checkpoint as ``open_checkpoint`` read it.

    ``kind``: one of ``KINDS``; ``source``: the .ckpt file read, or the exported folder;
    ``content``: what the .ckpt holds (an exported folder: its genodiff.json); ``tokenizer``:
    the one it stores (checkpoints written before tokenizers were stored: the one their config
    names, else the default); ``record``: what its kind records to rebuild it (a generator: the
    run's config; a guidance classifier: the ``genodiff_classifier`` record; a fine-tuned one:
    the ``finetuned_classifier`` record)."""

    kind: str
    source: Path
    content: dict[str, Any]
    tokenizer: Tokenizer
    record: dict[str, Any]

    @property
    def exported(self) -> bool:
        """Whether this is a folder ``genodiff export`` wrote (no .ckpt, no state dict)."""
        return self.source.is_dir()

    def weights(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """The stored tensors whose names start with ``prefix``, named without it."""
        state = self.content["state_dict"]
        return {k.removeprefix(prefix): t for k, t in state.items() if k.startswith(prefix)}


class UnknownCheckpointError(InputValueError):
    """A torch file of none of the ``KINDS``; ``content`` is what it holds, for a caller that
    can say more about it (a fine-tuning checkpoint of an older format)."""

    def __init__(self, source: Path, content: Any) -> None:
        self.source, self.content = source, content
        super().__init__(
            f"{source} is not a genodiff training checkpoint (no hyper_parameters.config, "
            f"{CLASSIFIER_RECORD_KEY} or hyper_parameters.{FINETUNED_RECORD_KEY}); a backbone "
            "checkpoint goes to init_from= / pretrained= / load_pretrained"
        )


class WrongKindError(InputValueError):
    """A checkpoint of another of the ``KINDS`` (``found``) than the one asked for
    (``expected``): it says what the file is and where it goes (``parameter``: the argument
    that takes that kind)."""

    def __init__(self, source: Path, found: str, expected: str) -> None:
        self.source, self.found, self.expected = source, found, expected
        kind = KINDS[found]
        super().__init__(
            f"{source} is {kind.what}, not {KINDS[expected].what}; {kind.use}",
            parameter=kind.parameter,
        )


def open_checkpoint(
    reference: str | Path,
    expect: str | None = None,
    map_location: str | torch.device = "cpu",
    *,
    mmap: bool = False,
) -> StoredCheckpoint:
    """The checkpoint ``reference`` names (see ``locate``), read with its tensors on
    ``map_location`` (``mmap``: a .ckpt's tensors mapped from the file, not read). ``expect``,
    one of ``KINDS``, is required of it: a checkpoint of another kind is one ``WrongKindError``
    saying what it is and where it goes. One-line errors for a missing, damaged or unsafe file
    (``io.read_checkpoint_file``), for a file of no kind (``UnknownCheckpointError``) and for
    records that are not bounded trees of plain values (``plain_records.plain_tree``)."""
    source = locate(reference)
    exported = source.is_dir()
    stored = _open_exported(source) if exported else _open_file(source, map_location, mmap)
    if expect is not None and stored.kind != expect:
        raise WrongKindError(source, stored.kind, expect)
    return stored


def locate(reference: str | Path) -> Path:
    """The checkpoint file, or exported folder, ``reference`` names:

    - a checkpoint file (.ckpt);
    - a folder that ``genodiff export`` wrote (it holds genodiff.json);
    - a folder holding checkpoints (``last.ckpt`` when there are several), or a run's output
      folder holding them in ``checkpoints/``;
    - a Hugging Face Hub id ``org/name[@revision]`` of a repository holding any of those
      (``genodiff.hub``; a local path of the same spelling wins).
    """
    source = hub.resolve(reference, RUN_FILES)
    if source.is_dir() and (source / RUN_RECORD_FILE).is_file():
        return source
    if source.is_dir() and (source / CHECKPOINT_FOLDER).is_dir():
        source = source / CHECKPOINT_FOLDER
    return checkpoint_file(source)


def checkpoint_file(source: Path) -> Path:
    """``source`` when it is a file, else the checkpoint in that folder: its ``last.ckpt``, or
    its only ``*.ckpt``."""
    if not source.is_dir():
        return require_regular_file(source, "checkpoint")
    if (source / "last.ckpt").is_file():
        return source / "last.ckpt"
    found = sorted(p.name for p in source.glob("*.ckpt"))
    if len(found) == 1:
        return source / found[0]
    raise InputFileNotFoundError(
        f"{source} holds no genodiff.json (a folder from genodiff export) and "
        + (f"several checkpoints ({', '.join(found)}): name one" if found else "no *.ckpt")
    )


def _open_file(path: Path, map_location: str | torch.device, mmap: bool) -> StoredCheckpoint:
    """A .ckpt: its kind, told from what it holds, then its records (``RECORD_KEYS``) as
    bounded trees of plain values (``plain_tree``; the rest, tensors and Lightning's states,
    as read), before anything reads them; its epoch as a resume goes on with it
    (``epochs.reopen_cut_epoch``: one an earlier genodiff wrote may record the next epoch)."""
    content = read_checkpoint_file(path, map_location, mmap=mmap)  # CRCs, weights_only
    if _kind_of(content)[0] is None:  # another project's checkpoint: not checked, not read
        raise UnknownCheckpointError(path, content)
    records = {key: plain_tree(content[key], path, key) for key in RECORD_KEYS if key in content}
    content = {**content, **records}
    reopen_cut_epoch(content)
    kind, record = _kind_of(content)  # of some kind still: records only became plainer
    if kind == GENERATOR:
        check_run_config(record, path, "use the checkpoint as genodiff train wrote it")
    return StoredCheckpoint(kind, path, content, tokenizer_from_checkpoint(content, path), record)


def _kind_of(content: Any) -> tuple[str | None, dict[str, Any]]:
    """(kind, its record) of what a checkpoint file holds; (None, {}) for none of ``KINDS``.
    genodiff stores its records as plain dicts, so another project's Lightning checkpoint
    whose hyper-parameters hold an OmegaConf ``config`` (upstream MDLM) is none of them."""
    if not isinstance(content, dict) or not isinstance(content.get("state_dict"), dict):
        return None, {}
    if isinstance(content.get(CLASSIFIER_RECORD_KEY), dict):
        return CLASSIFIER, content[CLASSIFIER_RECORD_KEY]
    hyper = content.get("hyper_parameters")
    hyper = hyper if isinstance(hyper, dict) else {}
    if isinstance(hyper.get(FINETUNED_RECORD_KEY), dict):
        return FINETUNED, hyper[FINETUNED_RECORD_KEY]
    if isinstance(hyper.get("config"), dict):
        return GENERATOR, hyper["config"]
    return None, {}


def _open_exported(folder: Path) -> StoredCheckpoint:
    """A ``genodiff export`` folder: its genodiff.json (one clear error for a malformed or
    edited one) and tokenizer.json (a folder without one: the tokenizer its config names)."""
    record = read_run_record(folder)
    config = record["config"]
    tokenizer = load_tokenizer(folder) or build_tokenizer(config.get("tokenizer"))
    return StoredCheckpoint(GENERATOR, folder, record, tokenizer, config)


@global_random_state_kept()  # building the module draws its discarded initial weights
def load_model(reference: str | Path, map_location: str | torch.device = "cpu") -> GenerativeModel:
    """A ``genodiff train`` run's model with its tokenizer, in eval mode on ``map_location``.
    ``reference`` is anything ``locate`` takes: a training checkpoint (.ckpt), a run's folder
    or its checkpoints folder, a folder that ``genodiff export`` wrote (its backbone serves as
    both the trained and the averaged weights), or a Hub id of a repository holding one."""
    stored = open_checkpoint(reference, GENERATOR, map_location)
    model = GenerativeModel(stored.record, stored.tokenizer)
    if stored.exported:
        _load_exported_weights(model, stored.source)
        model.provenance = {k: v for k, v in stored.content.items() if k != "config"}
    else:
        load_weights(model, stored.weights(), stored.source)
        content = stored.content
        model.provenance = {
            "global_step": content.get("global_step"),
            "epoch": content.get("epoch"),
            "exported_from": stored.source.name,
            **content.get(RUN_STATE_KEY, {}),
        }
    model.provenance["source"] = str(stored.source)
    model.provenance[WEIGHTS_DIGEST_KEY] = weights_digest(model)
    return model.to(map_location).eval()


def weights_digest(model: GenerativeModel) -> str:
    """CRC-32 (8 hex digits, ``folders.tensors_digest``) of the weights ``model`` samples and
    scores with: its averaged backbone, and its averaged objective when that has parameters
    (Plaid). The same weights give the same digest wherever they were loaded from (a .ckpt, or
    the folder ``genodiff export`` wrote of its EMA weights); about a gigabyte a second."""
    tensors = {f"backbone.{k}": t for k, t in model.eval_backbone.state_dict().items()}
    if any(True for _ in model.eval_objective.parameters()):
        tensors |= {f"objective.{k}": t for k, t in model.eval_objective.state_dict().items()}
    return tensors_digest(tensors)


def _load_exported_weights(model: GenerativeModel, folder: Path) -> None:
    """The exported backbone as both the trained and the averaged weights of ``model``."""
    if any(True for _ in model.objective.parameters()):
        raise InputValueError(
            f"{folder}: the {model.config['objective']['name']} objective has learned "
            "parameters of its own, which an exported folder does not hold; load the run's .ckpt"
        )
    weights = load_pretrained(folder).state_dict()
    load_weights(model.backbone, weights, folder)
    if model.eval_backbone is not model.backbone:
        load_weights(model.eval_backbone, weights, folder)
