"""The cross-validation protocol: folds, one fine-tuning run per (task, lr, batch size, fold),
resume, and the choice of hyper-parameters per task.

Fold k of ``folds``: scikit-learn ``StratifiedKFold(folds, shuffle=True, random_state=seed)`` on
the train split gives k's validation part (the parts of different folds are disjoint and each
keeps the class proportions); the rest of the train split is k's training data. The test split
is never used for training or selection. Fold k trains with seed ``seed + k`` (weights of a
from-scratch model, batch order, RC augmentation), the same for every sweep point. A
from-scratch backbone is drawn without moving the global generator on, so the classification
head and the RC flips are the same draws whether fold k starts from scratch or from
``pretrained`` weights: the two tables compare paired folds. The
checkpoint with the best validation accuracy (early stopping on it) is scored on the test
split. Per task the sweep point with the best mean validation accuracy over the folds is
reported.

Each run writes ``<output_dir>/runs/<task>/<lr>_<bs>/fold<k>/result.json`` when it finishes; a
re-run skips runs that have it. A fold writes ``checkpoints/last.ckpt`` (atomically) after every
epoch's validation and on SIGTERM; a re-run resumes an unfinished fold from it (weights,
optimizer, schedule, early-stopping state, the best checkpoint so far, the random state, the
epoch's data order and the position in it)
and restarts a fold without one from scratch, so the table is the same as without the
interruption. Once a fold has a result or a checkpoint, a re-run with another config
(``config.yaml``), other weights under ``pretrained`` (their CRC-32 in ``pretrained.json``) or
other files of the fold's task (the CRC-32 of its sequences in ``runs/<task>/data.json``) is
refused: one table never mixes the two.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import UnionType
from typing import Any

import lightning as L
import numpy as np
import torch
import yaml
from lightning.pytorch.callbacks import EarlyStopping, TQDMProgressBar
from lightning.pytorch.trainer.states import TrainerFn
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.class_weight import compute_class_weight
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from genodiff.atomic_files import (
    atomic_write,
    remove_temporary_files,
    setting_changes,
    write_text,
)
from genodiff.backbones.build import CONFIG_ATTR
from genodiff.checkpoints.folders import tensors_digest
from genodiff.checkpoints.io import loadable_checkpoint
from genodiff.checkpoints.lightning_io import AtomicCheckpointIO
from genodiff.checkpoints.run_folder import CHECKPOINT_FOLDER, LAST
from genodiff.config import ConfigError, backbone_differences
from genodiff.data.benchmarks import (
    GENOMIC_BENCHMARKS,
    SPLITS,
    TaskData,
    class_files,
    load_task,
    task_layout,
    task_tokenizer,
)
from genodiff.data.loaders import EpochShuffleSampler, ResumableLoader, train_position
from genodiff.errors import InputValueError
from genodiff.finetuning.classifier import SequenceClassifier, build_backbone, load_backbone
from genodiff.finetuning.config import (
    FinetuneConfig,
    FinetuneOptimConfig,
    GivenModel,
    sweep_tag,
)
from genodiff.finetuning.module import ClassifierModule
from genodiff.finetuning.results import RESULT_FILES
from genodiff.finetuning.trained import classifier_record
from genodiff.parallel import Workers, launch_workers
from genodiff.plain_records import check_yaml_file, read_json_object
from genodiff.progress import counted
from genodiff.randomness.kept import global_random_state_kept
from genodiff.tokenizers import Tokenizer, tokenizer_record
from genodiff.training.optim import copy_settings
from genodiff.training.run_checks import trainer_kwargs
from genodiff.training.session import CONFIG_FILE, exit_when_stopped, fit, hold_output
from genodiff.training.trainer import (
    LatestCheckpoint,
    StepsDoneCSVLogger,
    checkpoint_reads_unsaid,
    log_at_steps_done,
    progress_bars,
    silence_lightning_notices,
)

RESULT_FILE = "result.json"
# What a fold's RESULT_FILE holds that the summary reads (the other keys are for the reader).
RESULT_NUMBERS = dict.fromkeys(
    ("lr", "batch_size", "val_acc", "test_acc", "test_mcc", "test_f1"), int | float
)
PRETRAINED_FILE = "pretrained.json"  # in output_dir: which weights the folds start from
DATA_FILE = "data.json"  # in runs/<task>: which state of the task's files its folds read
# A stopped fine-tuning goes on where it stopped: finished runs are skipped, an unfinished one
# resumes from its last.ckpt.
RESUME_HINT = "Run the same command again to resume (finished runs are skipped)"


def check_fold_counts(
    counts: np.ndarray, folds: int, classes: list[str] | None = None, task: str | None = None
) -> None:
    """ValueError when a class (``counts``: training sequences per class, named ``classes``
    of ``task`` where given) has fewer sequences than ``folds``: some fold's validation part
    would lack it."""
    short = np.flatnonzero(counts < folds)
    if len(short) == 0:
        return
    c = int(short[0])
    which = f"class {classes[c]!r}" if classes else "a class"
    raise InputValueError(
        ("" if task is None else f"task {task!r}: ")
        + f"{which} has only {counts[c]} training sequences, fewer than folds={folds}; lower "
        "folds or add sequences"
    )


def fold_splits(labels: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train indices, validation indices) into the train split for each of ``folds`` folds."""
    check_fold_counts(np.bincount(labels), folds)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(labels)), labels))


@dataclass(frozen=True)
class Run:
    """One fine-tuning run: a task, a sweep point, a fold."""

    task: str
    lr: float
    batch_size: int
    fold: int

    @property
    def sweep_tag(self) -> str:
        return sweep_tag(self.lr, self.batch_size)

    def folder(self, output_dir: Path) -> Path:
        return output_dir / "runs" / self.task / self.sweep_tag / f"fold{self.fold}"


class FoldProgressBar(TQDMProgressBar):
    """Lightning's progress bar with the task and fold in front of the epoch."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def on_train_epoch_start(self, trainer: L.Trainer, *args: Any) -> None:
        super().on_train_epoch_start(trainer, *args)
        self.train_progress_bar.set_description(f"{self.prefix} epoch {trainer.current_epoch}")


class FoldClock(L.Callback):
    """The wall and CPU seconds a fold has run, over its interruptions: the time up to each
    checkpoint rides in it (Lightning saves a callback's ``state_dict``), so a resumed fold's
    ``wall_s`` / ``cpu_s`` count the parts before the resume too. Only a resumed fit reads it
    back: the test's load of the selected checkpoint leaves the clock running."""

    def __init__(self) -> None:
        self.start = time.perf_counter(), time.process_time()
        self.before = 0.0, 0.0  # (wall, CPU) seconds of the parts before a resume

    def seconds(self) -> tuple[float, float]:
        """(wall, CPU) seconds so far."""
        now = time.perf_counter(), time.process_time()
        return tuple(b + n - s for b, n, s in zip(self.before, now, self.start, strict=True))

    def state_dict(self) -> dict[str, float]:
        wall, cpu = self.seconds()
        return {"wall_s": wall, "cpu_s": cpu}

    def on_load_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        state = checkpoint.get("callbacks", {}).get(self.state_key)
        if trainer.state.fn == TrainerFn.FITTING and state is not None:
            self.before = float(state["wall_s"]), float(state["cpu_s"])


class StoppedEarlyStopping(EarlyStopping):
    """Lightning's ``EarlyStopping``, whose stop holds across a resume: a fold it ended, then
    interrupted before its record was written (in its test), resumes from a checkpoint that
    remembers the stop (``stopped_epoch``) but not the Trainer's ``should_stop``, and Lightning
    would train it on."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.stopped_epoch > 0:  # restored from a checkpoint saved after it stopped the fit
            trainer.should_stop = True


def _loader(
    task: TaskData,
    split: str,
    index: np.ndarray | None,
    batch: int,
    seed: int | None = None,
    trainer: L.Trainer | None = None,
) -> DataLoader:
    """Batches of ``split`` (rows ``index``), in order; for training (a ``seed`` and the
    ``trainer`` that trains on them) shuffled per epoch from ``(seed, epoch)`` and checkpointed
    (``ResumableLoader``), so a fold resumed mid-epoch goes on with that epoch's next batch."""
    data = getattr(task, split)
    ids, labels = data.ids, data.labels
    if index is not None:
        ids, labels = ids[index], labels[index]
    dataset = TensorDataset(ids, labels)
    if seed is None:
        return DataLoader(dataset, batch_size=batch)
    sampler = EpochShuffleSampler(dataset, seed)
    position = partial(train_position, trainer, sampler)
    return ResumableLoader(dataset, batch_size=batch, sampler=sampler, position=position)


def class_weights(how: str, labels: Tensor, num_classes: int) -> Tensor | None:
    """Cross-entropy weights (C,) for ``classifier.class_weights``: None for "none"; for
    "balanced", n / (C * n_c) over the training ``labels`` (N,) (scikit-learn's balanced
    weights), so each class contributes equally to the loss."""
    if how == "none":
        return None
    labels = np.asarray(labels)
    weights = compute_class_weight("balanced", classes=np.arange(num_classes), y=labels)
    return torch.tensor(weights, dtype=torch.float32)


def run_fold(
    cfg: DictConfig,
    task: TaskData,
    run: Run,
    split: tuple[np.ndarray, np.ndarray],
    pretrained: tuple[nn.Module, Tokenizer | None] | None,
    prefix: str = "",
    progress_bar: bool = True,
    workers: Workers | None = None,
) -> dict[str, Any]:
    """Fine-tune, select on validation accuracy, score on test; returns the result record.
    ``pretrained``: the backbone to start from and its tokenizer (``load_backbone``), or None
    for a new backbone of ``cfg.model``. The classifier reads with the pretrained model's
    tokenizer, else with the one the task is encoded with; its checkpoints store it.
    ``workers``: the processes the runs are spread over (default: this one alone)."""
    folder = run.folder(Path(cfg.output_dir))
    resume = folder / CHECKPOINT_FOLDER / LAST
    checkpoint_io = AtomicCheckpointIO()
    resumed = loadable_checkpoint(resume)
    if resumed is not None:  # Lightning's read of it takes this one: the file is read once
        checkpoint_io.hand_over(resume, resumed)
        remove_temporary_files(resume.parent)  # checkpoints the interrupted part was writing
        print(f"genodiff finetune: {prefix}: resuming from {resume}")
    else:  # leftovers of a run interrupted before its first checkpoint
        resume = None
        shutil.rmtree(folder, ignore_errors=True)
    clock = FoldClock()
    seed = int(cfg.seed) + run.fold
    L.seed_everything(seed, workers=True, verbose=False)
    tokenizer = task.tokenizer  # what the task is encoded with, unless the pretrained run has one
    if pretrained is not None:
        backbone = copy_settings(pretrained[0], copy.deepcopy(pretrained[0]))
        tokenizer = pretrained[1] if pretrained[1] is not None else tokenizer
    else:  # drawn from the fold's seed, which the head and the RC flips then draw from again
        with global_random_state_kept():  # as after a pretrained start: the two are paired
            backbone = build_backbone(OmegaConf.to_container(cfg.model, resolve=True), tokenizer)
    c = cfg.classifier
    classifier = SequenceClassifier(
        backbone, len(task.classes), tokenizer, c.pooling, c.conjoin_train, c.conjoin_eval
    )
    optim = FinetuneOptimConfig(**OmegaConf.to_container(cfg.optim, resolve=True))
    record = classifier_record(classifier, task.classes, task.max_length, task.name)
    train_idx, val_idx = split
    weights = class_weights(c.class_weights, task.train.labels[train_idx], len(task.classes))
    module = ClassifierModule(classifier, run.lr, optim, c.rc_aug, record, weights)
    checkpoint = LatestCheckpoint(
        folder / CHECKPOINT_FOLDER, monitor="val/acc", mode="max", filename="best-epoch{epoch}"
    )
    es = cfg.early_stopping
    stopper = StoppedEarlyStopping(  # not strict: a fit without validation is refused below
        "val/acc", min_delta=es.min_delta, patience=es.patience, mode="max", strict=False
    )
    silence_lightning_notices(repeats=False)  # "GPU available: ..." once, not every fold
    workers = workers or Workers()
    kwargs = workers.run_trainer_kwargs(trainer_kwargs(cfg, progress_bar))
    # Log at least once an epoch (Lightning warns of an interval longer than the epoch).
    batches = -(-len(train_idx) // run.batch_size)
    kwargs["log_every_n_steps"] = max(1, min(kwargs.get("log_every_n_steps") or 50, batches))
    bars = progress_bars(kwargs, f"genodiff finetune {prefix}", FoldProgressBar(prefix))
    callbacks = [checkpoint, stopper, clock, *bars]
    trainer = L.Trainer(
        default_root_dir=folder,
        logger=StepsDoneCSVLogger(folder, name="logs"),
        callbacks=callbacks,
        plugins=[checkpoint_io],
        enable_model_summary=False,
        **kwargs,
    )
    log_at_steps_done(trainer)
    # A resume is said above, once; the test's read of the selected checkpoint not at all.
    with checkpoint_reads_unsaid():
        fit(
            trainer,
            module,
            "finetune",
            RESUME_HINT,
            train_dataloaders=_loader(task, "train", train_idx, run.batch_size, seed, trainer),
            val_dataloaders=_loader(task, "train", val_idx, run.batch_size),
            ckpt_path=resume,
        )
        best = checkpoint.best_model_path
        if not best:
            _refuse_unvalidated_fold(folder, prefix, trainer.global_step)
        with exit_when_stopped(trainer, "finetune", RESUME_HINT):  # a SIGTERM in the test: 143
            trainer.test(module, _loader(task, "test", None, run.batch_size), best, verbose=False)
    predicted, truth = module.test_predictions.numpy(), module.test_labels.numpy()
    if not cfg.keep_checkpoints:
        shutil.rmtree(folder / CHECKPOINT_FOLDER, ignore_errors=True)
    else:  # the fold is done: its last epoch's state is no longer needed to resume it, and the
        # folder's only checkpoint is the selected one (what loading the folder gives)
        (folder / CHECKPOINT_FOLDER / LAST).unlink(missing_ok=True)
    wall, cpu = clock.seconds()  # before a resume too (FoldClock)
    record = {
        "task": run.task,
        "fold": run.fold,
        "seed": seed,
        "lr": run.lr,
        "batch_size": run.batch_size,
        "val_acc": float(checkpoint.best_model_score),
        "test_acc": float(accuracy_score(truth, predicted)),
        "test_mcc": float(matthews_corrcoef(truth, predicted)),
        "test_f1": float(f1_score(truth, predicted, average="macro")),
        "test_loss": module.test_loss,
        "epochs": int(trainer.current_epoch),
        "checkpoint": best if cfg.keep_checkpoints else f"{best} (deleted)",
        "n_train": len(train_idx),
        "n_val": len(val_idx),
        "n_test": len(task.test),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "rank": workers.rank,  # the process that ran it (genodiff.parallel)
    }
    with atomic_write(folder / RESULT_FILE) as handle:  # a result.json is always complete
        handle.write(json.dumps(record, indent=2))
    return record


def _refuse_unvalidated_fold(folder: Path, prefix: str, step: int) -> None:
    """ConfigError for a fold whose training ended before its first validation (``trainer.
    max_steps`` inside its first epoch): it has no checkpoint to select. Its folder goes, so
    that the same ``output_dir`` takes the corrected config."""
    shutil.rmtree(folder, ignore_errors=True)
    raise ConfigError(
        f"{prefix}: training ended at step {step}, before the fold's first validation, and "
        "each fold's checkpoint is chosen on validation accuracy; raise trainer.max_steps "
        "above one epoch's steps or leave it out"
    )


def select(records: list[dict[str, Any]]) -> tuple[float, int]:
    """The (lr, batch_size) with the best mean validation accuracy; ties go to the earliest."""
    points: dict[tuple[float, int], list[float]] = {}
    for r in records:
        points.setdefault((r["lr"], r["batch_size"]), []).append(r["val_acc"])
    return max(points, key=lambda p: np.mean(points[p]))


def check_encoding(tokenizer: Tokenizer | None, source: str) -> None:
    """ConfigError when the pretrained model reads other ids than the tasks are encoded with
    (``genodiff.data.benchmarks.task_tokenizer``): it would read every sequence as noise."""
    tasks = task_tokenizer()
    if tokenizer is not None and tokenizer_record(tokenizer) != tokenizer_record(tasks):
        raise ConfigError(
            f"pretrained={source} reads with the tokenizer {tokenizer.name!r} "
            f"({tokenizer.vocab_size} ids), and the tasks are encoded with {tasks.name!r} "
            f"({tasks.vocab_size} ids); fine-tune a model trained with {tasks.name!r}"
        )


def check_pretrained_model(given: GivenModel, held: Mapping[str, Any], source: str) -> None:
    """ConfigError when the ``model`` settings a run was given (``GivenModel``: the config
    file's own model section, then the model overrides) describe another backbone than the
    one ``pretrained=source`` holds (``held``, its recorded config): the folds fine-tune the
    pretrained backbone, and ``model`` is used only from scratch, so the run would not
    fine-tune the model it names (``backbone_differences``)."""
    labels = ("given", "pretrained")
    differences = backbone_differences(given.written, held, labels)
    if differences:
        where = f"the model section of {given.file}"
        fix = (
            f"remove the model section from {given.file.name} (a model its defaults list picks, "
            "as configs/genomic_benchmarks_demo.yaml picks caduceus_tiny, is used only from "
            "scratch), or drop pretrained to train that model from scratch"
        )
    else:
        differences = backbone_differences(given.settings, held, labels)
        where, fix = "model", "leave model out, or give the pretrained backbone's settings"
    if differences:
        raise ConfigError(
            f"{where} and pretrained={source} describe different backbones "
            f"({'; '.join(differences)}): the folds fine-tune the pretrained one, and model is "
            f"used only from scratch (pretrained=null); {fix}"
        )


def check_tasks(cfg: DictConfig, tasks: list[str]) -> None:
    """Every task's folder layout (each class of each split holds files) and its classes'
    sizes against ``folds``, checked (without reading the sequences) before anything is
    written."""
    for name in tasks:
        folder, classes = task_layout(cfg.benchmark.root, name, cfg.benchmark.download)
        counts = np.array([len(files) for files in class_files(folder / "train", classes)])
        check_fold_counts(counts, int(cfg.folds), classes, name)
        class_files(folder / "test", classes)  # every test class has files


def _saved_finetune_config(path: Path) -> dict[str, Any] | None:
    """The fine-tuning config a run wrote at ``path`` (``config.yaml``); None when there is no
    such file or it is not a fine-tuning's (another command's run, a user's own file)."""
    if not path.is_file():
        return None
    try:
        check_yaml_file(path)
        saved = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OSError, yaml.YAMLError, OmegaConfBaseException, InputValueError):  # not ours
        return None
    keys = {f.name for f in dataclasses.fields(FinetuneConfig)}
    if not isinstance(saved, dict) or "folds" not in saved or not saved.keys() <= keys:
        return None
    return saved


def _holds_fold_results(runs: Path) -> bool:
    """Whether a fold under ``runs`` (an output_dir's runs/, or one task's folder in it) has a
    result or a checkpoint (to resume or to keep)."""
    return any(runs.glob(f"**/{RESULT_FILE}")) or any(runs.glob("**/*.ckpt"))


def check_task_data(task: TaskData, output_dir: Path, record: bool) -> None:
    """Refuse to mix folds of two states of a task's files: the CRC-32 of its sequences and
    labels as read against the one in ``runs/<task>/DATA_FILE``, once a fold of the task has
    a result or a checkpoint; ``record``: write it there (the main process)."""
    tensors = {f"{s}.{k}": getattr(getattr(task, s), k) for s in SPLITS for k in ("ids", "labels")}
    digest = tensors_digest(tensors)
    path = output_dir / "runs" / task.name / DATA_FILE
    saved = _run_record(path, crc32=str)["crc32"] if path.exists() else None
    if saved not in (None, digest) and _holds_fold_results(path.parent):
        raise InputValueError(
            f"task {task.name!r}: its files changed since its folds in {path.parent} ran "
            f"(CRC-32 of the sequences {saved} then, {digest} now); restore them, or delete "
            f"{path.parent} (or pick a new output_dir) to fine-tune it again"
        )
    if record and saved != digest:
        write_text(path, json.dumps({"crc32": digest}) + "\n")


def _run_record(path: Path, **types: type | UnionType) -> dict[str, Any]:
    """The record ``path`` that fine-tuning wrote in its output_dir (``DATA_FILE``,
    ``PRETRAINED_FILE``, a fold's ``RESULT_FILE``), checked to hold each key of ``types`` as a
    value of its type (a bool is no number); an input error naming it and the folder to delete
    when it is damaged (edited by hand, or by a tool)."""
    advice = (
        f"genodiff wrote it for the runs in {path.parent}: delete that folder to run them again"
    )
    record = read_json_object(path, advice)
    for key, wanted in types.items():
        value = record.get(key)
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise InputValueError(f"{path}: {key} is {value!r:.40}, not a record's; {advice}")
    return record


def _check_pretrained_weights(output_dir: Path, source: str, weights: str) -> None:
    """Refuse to mix fold results of two states of the weights ``pretrained=source`` names
    (a training run's last.ckpt that went on training, a Hub id's newer revision): the CRC-32
    ``weights`` of the backbone against the one in ``PRETRAINED_FILE`` (folders written before
    it was recorded: nothing to check)."""
    path = output_dir / PRETRAINED_FILE
    if not path.is_file() or not _holds_fold_results(output_dir / "runs"):
        return
    saved = _run_record(path).get("weights_crc32")
    if saved != weights:
        raise ConfigError(
            f"pretrained={source} holds other weights (CRC-32 {weights}) than the ones the "
            f"folds in output_dir={output_dir} were fine-tuned from ({saved}); pick a new "
            "output_dir, or point pretrained at a copy of the old weights"
        )


# The settings a fine-tuning may resume with changed: which tasks this run takes, and how the
# runs are spread and shown (every fold's result is the one-process result).
FREE_ON_RESUME = {
    "benchmark": ("tasks", "download"),
    "trainer": ("devices", "num_nodes", "enable_progress_bar"),
}


def _check_output_dir(cfg: DictConfig, output_dir: Path) -> None:
    """Refuse an ``output_dir`` this run would spoil: a file; a folder holding files where a
    fine-tuning writes (config.yaml, pretrained.json, results.*) or fold results without a
    fine-tuning's config.yaml beside them; fold results of a different config (a folder
    without any fold's result or checkpoint, left by a run that failed first, holds none)."""
    if output_dir.exists() and not output_dir.is_dir():
        raise ConfigError(f"output_dir={output_dir} is a file; choose a folder")
    saved = _saved_finetune_config(output_dir / CONFIG_FILE)
    done = _holds_fold_results(output_dir / "runs")
    if saved is None:
        ours = (CONFIG_FILE, PRETRAINED_FILE, *RESULT_FILES)
        found = [n for n in ours if (output_dir / n).exists()]
        found += ["fold results in runs/"] if done else []
        if found:
            raise ConfigError(
                f"output_dir={output_dir} holds {', '.join(found)}, not written by a "
                "fine-tuning (no fine-tuning config.yaml there): this run would overwrite or "
                "mix with them; choose another output_dir"
            )
        return
    if not done:
        return
    current = OmegaConf.to_container(cfg, resolve=True)
    for config in (saved, current):
        for section, keys in FREE_ON_RESUME.items():
            for key in keys:
                config.get(section, {}).pop(key, None)
        if cfg.pretrained:  # model is the pretrained backbone's: its weights' CRC-32 decides
            config.pop("model", None)
    changed = setting_changes(saved, current)
    if changed:
        raise ConfigError(
            f"output_dir={output_dir} holds results of a different config ({'; '.join(changed)}"
            "); pick a new output_dir, delete the old one, or run with the old settings"
        )


def run_benchmark(
    cfg: DictConfig, progress_bar: bool = True, given_model: GivenModel | None = None
) -> dict[str, Any] | None:
    """Every (task, sweep point, fold) run not finished yet, spread over the processes the
    ``trainer`` section asks for (``genodiff.parallel``); returns per-task results:
    ``{task: {"classes", "max_length", "selected": {"lr", "batch_size"}, "runs": [...]}}`` in
    the main process, None in the others. With ``pretrained`` weights, ``cfg.model`` becomes
    the config of their backbone (what the folds fine-tune, as ``config.yaml`` then records
    it); ``given_model``: the ``model`` settings the run was given besides its defaults
    list's option (``GivenModel.of``: the config file's own section, overrides), which must
    describe that backbone (``check_pretrained_model``)."""
    output_dir = Path(cfg.output_dir)
    names = list(cfg.benchmark.tasks or GENOMIC_BENCHMARKS)
    # Every check comes before the first write into output_dir.
    _check_output_dir(cfg, output_dir)
    pretrained = load_backbone(cfg.pretrained) if cfg.pretrained else None
    weights = None
    if pretrained is not None:
        check_encoding(pretrained[1], cfg.pretrained)
        held = json.loads(json.dumps(getattr(pretrained[0], CONFIG_ATTR)))  # plain values
        if given_model is not None:
            check_pretrained_model(given_model, held, cfg.pretrained)
        cfg.model = held
        weights = tensors_digest(pretrained[0].state_dict())
        _check_pretrained_weights(output_dir, cfg.pretrained, weights)
    check_tasks(cfg, names)
    with hold_output(output_dir, OmegaConf.to_container(cfg, resolve=True)) as main:
        if main and weights is not None:
            record = {"pretrained": cfg.pretrained, "weights_crc32": weights}
            write_text(output_dir / PRETRAINED_FILE, json.dumps(record, indent=2) + "\n")
        workers = launch_workers(cfg.trainer)
        b = cfg.benchmark
        tasks = [load_task(b.root, name, b.max_length, b.download) for name in names]
        for task in tasks:
            check_task_data(task, output_dir, main)
        splits = {
            t.name: fold_splits(t.train.labels.numpy(), int(cfg.folds), int(cfg.seed))
            for t in tasks
        }
        grid = [  # every run, in one fixed order: the same in every process
            (number, task, Run(task.name, float(lr), int(batch_size), fold))
            for number, task in enumerate(tasks, 1)
            for lr, batch_size, fold in itertools.product(
                cfg.sweep.lr, cfg.sweep.batch_size, range(int(cfg.folds))
            )
        ]
        for index, (number, task, run) in enumerate(grid):
            if not workers.takes(index):
                continue
            # Named as the run's folder is (runs/<task>/<sweep tag>/fold<k>, k from 0).
            where = (
                f"[{task.name} {number}/{len(tasks)}] {run.sweep_tag}/fold{run.fold} "
                f"(of fold0..fold{int(cfg.folds) - 1})"
            )
            if (run.folder(output_dir) / RESULT_FILE).is_file():
                print(f"genodiff finetune: {where}: done before, skipped")
                continue
            split = splits[task.name][run.fold]
            record = run_fold(cfg, task, run, split, pretrained, where, progress_bar, workers)
            print(
                f"genodiff finetune: {where}: val acc {record['val_acc']:.4f}, test acc "
                f"{record['test_acc']:.4f} ({counted(record['epochs'], 'epoch')}, "
                f"{record['wall_s']:.0f} s)"
            )
        workers.wait_for_all()
        if workers.rank != 0:
            return None
        results = {}
        for task in tasks:
            records = [
                _run_record(run.folder(output_dir) / RESULT_FILE, **RESULT_NUMBERS)
                for _, t, run in grid
                if t is task
            ]
            lr, batch_size = select(records)
            results[task.name] = {
                "classes": task.classes,
                "max_length": task.max_length,
                "selected": {"lr": lr, "batch_size": batch_size},
                "runs": records,
            }
        _say_tasks_left_out(output_dir / "runs", names)
    return results


def _say_tasks_left_out(runs: Path, names: list[str]) -> None:
    """A line naming the tasks whose folds ``runs`` holds from earlier runs but this run does
    not name: its results.* (written over the earlier ones) leave them out."""
    others = sorted(
        task.name
        for task in runs.iterdir()
        if task.is_dir() and task.name not in names and _holds_fold_results(task)
    )
    if others:
        print(
            f"genodiff finetune: results.* hold the tasks this run names ({', '.join(names)}); "
            f"{runs} holds folds of {', '.join(others)} too: name them in benchmark.tasks as "
            "well to tabulate them all (their finished folds are skipped)"
        )
