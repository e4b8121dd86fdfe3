"""Setting up a ``genodiff train`` run: its tokenizer, and the Trainer with its checkpoints
(``LatestCheckpoint``, written atomically), learning-rate monitor, logs, and stops between
steps (``StopBetweenSteps``)."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import (
    Callback,
    LearningRateMonitor,
    ModelCheckpoint,
    ProgressBar,
    RichProgressBar,
)
from lightning.pytorch.callbacks.progress.rich_progress import _RICH_AVAILABLE
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from genodiff.checkpoints.epochs import reopen_cut_epoch
from genodiff.checkpoints.lightning_io import AtomicCheckpointIO
from genodiff.checkpoints.run_folder import CHECKPOINT_FOLDER
from genodiff.parallel import join_line_once
from genodiff.progress import is_terminal
from genodiff.threads import command_threads, share_threads
from genodiff.tokenizers import Tokenizer, build_tokenizer, load_tokenizer
from genodiff.training.epochs import trained_epoch
from genodiff.training.model_summary import ModelSummaryWithoutFlops
from genodiff.training.progress_lines import PlainProgressBar
from genodiff.training.run_checks import trainer_kwargs

# The logger Lightning's rank_zero_info writes to.
LIGHTNING_INFO_LOGGER = "lightning.pytorch.utilities.rank_zero"
# The lines Lightning logs when a fit or a test reads a checkpoint (its checkpoint connector's
# resume_start and resume_end), each followed by the checkpoint's path.
CHECKPOINT_READ_NOTICES = (
    "Restoring states from the checkpoint path at ",
    "Restored all states from the checkpoint at ",
    "Loaded model weights from the checkpoint at ",
)


def prepare_tokenizer(cfg: DictConfig, datamodule: Any) -> Tokenizer:
    """The run's tokenizer: the one saved in ``output_dir`` when resuming (``ckpt_path``),
    else the ``tokenizer:`` section's (trained on ``datamodule.training_texts()`` when that
    tokenizer learns its vocabulary from the data)."""
    if cfg.ckpt_path:
        saved = load_tokenizer(cfg.output_dir)
        if saved is not None:
            return saved
    section = OmegaConf.to_container(cfg.tokenizer, resolve=True)
    return build_tokenizer(section, corpus=datamodule.training_texts)


class _DropNotices(logging.Filter):
    """Drops Lightning's advertisement ("💡 Tip: ... try installing litlogger ..."), and once
    ``repeats`` is False every notice it passed before in this process."""

    def __init__(self) -> None:
        super().__init__()
        self.repeats = True
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("💡 Tip:"):
            return False
        if self.repeats:
            return True
        shown = message not in self.seen
        self.seen.add(message)
        return shown


def silence_lightning_notices(repeats: bool = True) -> None:
    """Keep the lines that tell a genodiff user nothing out of a run's output: Lightning's
    advertisement for its cloud logger, the deprecation warning torch raises inside Lightning's
    own code (``isinstance(treespec, LeafSpec)`` in ``_pytree.py``), and the model summary's
    "Precision bf16-mixed is not supported" of every mixed-precision run (the GPU default),
    whose float32 size is right: mixed precision keeps the parameters in float32; and the
    "Initializing distributed" line of every process but the main one (``join_line_once``).
    ``repeats=False``: from now on in this process, Lightning's notices ("GPU available: ...",
    "Loading `train_dataloader` ...") are said once, not by every Trainer again (a
    fine-tuning builds one per fold)."""
    join_line_once()
    logger = logging.getLogger(LIGHTNING_INFO_LOGGER)
    notices = next((f for f in logger.filters if isinstance(f, _DropNotices)), None)
    if notices is None:
        notices = _DropNotices()
        logger.addFilter(notices)
    notices.repeats = notices.repeats and repeats
    leafspec = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
    warnings.filterwarnings("ignore", message=leafspec, category=FutureWarning)
    mixed = r"Precision \S+-mixed is not supported by the model summary"
    warnings.filterwarnings("ignore", message=mixed, category=UserWarning)


def _not_a_checkpoint_read(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(CHECKPOINT_READ_NOTICES)


@contextmanager
def checkpoint_reads_unsaid() -> Iterator[None]:
    """Inside the block, Lightning's lines on reading a checkpoint (``CHECKPOINT_READ_NOTICES``)
    are not shown: the caller says what a user needs of them itself (a fine-tuning: which fold
    resumes from which file; nothing for each fold's test of its selected checkpoint)."""
    logger = logging.getLogger(LIGHTNING_INFO_LOGGER)
    logger.addFilter(_not_a_checkpoint_read)
    try:
        yield
    finally:
        logger.removeFilter(_not_a_checkpoint_read)


class LatestCheckpoint(ModelCheckpoint):
    """The best checkpoint by ``monitor`` (``best-step<N>.ckpt``: lowest ``val/nelbo``) and a
    ``last.ckpt`` that is always the latest state between optimizer steps: rewritten at every
    validation, at the end of training and when SIGTERM stops the run (Lightning's
    ``save_last`` rewrites it only in a step where the best checkpoint changed); a validation
    in the middle of an optimizer step (``trainer.accumulate_grad_batches``) leaves it as it
    is, since a resume from there would drop the batches accumulated so far. Every checkpoint
    records the epoch of its latest batch, and one written where ``trainer.max_steps`` ended an
    epoch part-way resumes in that epoch (``genodiff.checkpoints.epochs.reopen_cut_epoch``; also
    applied to such checkpoints from earlier genodiff versions as they are read)."""

    def __init__(
        self,
        dirpath: Path,
        monitor: str = "val/nelbo",
        mode: str = "min",
        filename: str = "best-step{step}",
    ) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=filename,
            auto_insert_metric_name=False,
            monitor=monitor,
            mode=mode,
            save_last=True,
            enable_version_counter=False,  # one run per folder: never a last-v1.ckpt
        )
        self._latest_step = -1

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._should_save_on_train_epoch_end(trainer):
            self._save_latest(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Validation once per epoch: Lightning saves the best here, after validation; the
        # latest state follows it (saved first, it would make Lightning skip this step).
        super().on_train_epoch_end(trainer, pl_module)
        if self._should_save_on_train_epoch_end(trainer):
            self._save_latest(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save_latest(trainer)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        if isinstance(exception, SIGTERMException):  # pre-emption: keep the work done so far
            self._save_latest(trainer)

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        reopen_cut_epoch(checkpoint)

    def on_load_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        reopen_cut_epoch(checkpoint)  # before Lightning restores its loops from it

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # A run folder moved or copied, then resumed where it now is: its checkpoints moved
        # with it, and the best so far stays the best (Lightning forgets its score when the
        # folder's path changed). A run started from another folder's checkpoint, whose best
        # is not here, is left as Lightning has it.
        before = Path(state_dict.get("dirpath") or self.dirpath)
        here = Path(self.dirpath)
        best = state_dict.get("best_model_path")
        if before != here and (not best or (here / Path(best).name).is_file()):
            state_dict = moved_state(state_dict, before, here)
        with warnings.catch_warnings():
            # "The dirpath has changed ...": a resume into another folder, which the run's
            # report states in genodiff's words (training/fit_run.py)
            warnings.filterwarnings("ignore", message="The dirpath has changed")
            super().load_state_dict(state_dict)

    def _ModelCheckpoint__warn_if_dir_not_empty(self, dirpath: Any) -> None:  # noqa: N802
        """Lightning warns "Checkpoint directory ... exists and is not empty" when a fit starts
        in a folder holding checkpoints: here always the run's own (a resume), since
        ``run_folder.check_output_dir`` refuses a folder holding another run's."""

    def _save_latest(self, trainer: L.Trainer) -> None:
        fitting = trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
        if fitting and not trainer.fast_dev_run and self._latest_step != trainer.global_step:
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict) -> None:
        if mid_step(trainer):
            return
        super()._save_last_checkpoint(trainer, monitor_candidates)
        self._latest_step = trainer.global_step


def moved_state(state: dict[str, Any], before: Path, here: Path) -> dict[str, Any]:
    """A ``ModelCheckpoint`` state recorded in folder ``before`` with its paths in ``here``."""

    def moved(path: str) -> str:
        return str(here / Path(path).name) if path and Path(path).parent == before else path

    paths = ("best_model_path", "kth_best_model_path", "last_model_path")
    return {
        **state,
        "dirpath": str(here),
        **{key: moved(state[key]) for key in paths if key in state},
        "best_k_models": {moved(p): v for p, v in state.get("best_k_models", {}).items()},
    }


class StopBetweenSteps(Callback):
    """A stop asked for by SIGTERM or a first Ctrl-C (``Trainer.received_sigterm``) waits for
    the end of the optimizer step and of the validation in progress. Lightning stops after any
    batch: in the middle of ``trainer.accumulate_grad_batches`` the checkpoint would hold a
    step half done (a resume drops the gradients accumulated so far), and in a validation a
    resume skips what is left of it (no ``val/nelbo`` nor best checkpoint for that step)."""

    def __init__(self) -> None:
        self._held = False

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        self._hold(trainer, mid_step(trainer))

    def on_validation_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        self._hold(trainer, True)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._hold(trainer, mid_step(trainer))

    def _hold(self, trainer: L.Trainer, hold: bool) -> None:
        """Hold a stop asked for until ``hold`` is False, then hand it back to Lightning."""
        connector = trainer._signal_connector  # where Lightning's SIGTERM handler notes it
        connector.received_sigterm = _asked_anywhere(trainer, connector.received_sigterm)
        if hold and connector.received_sigterm:
            self._held, connector.received_sigterm = True, False
        elif not hold and self._held:
            self._held, connector.received_sigterm = False, True


def _asked_anywhere(trainer: L.Trainer, asked: bool) -> bool:
    """Whether any process of the run was asked to stop (``asked`` in this one), so that
    every process stops after the same step. Lightning checks each process's own flag after
    a step: a signal handled before that check in one process and after it in another (a
    terminal's Ctrl-C reaches them all; a scheduler may signal one) stopped one process while
    the others waited for it in the next step, for ever."""
    if trainer.world_size == 1:
        return asked
    flag = torch.tensor([float(asked)], device=trainer.strategy.root_device)  # (1,)
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return bool(flag.item())


class ShareThreads(Callback):
    """Each process of a run on several devices of this machine (DDP) computes on its share
    of the command's threads (``genodiff.threads.share_threads``), set once the processes
    run: Lightning's launch would leave each on (all cores / processes), whatever
    ``--threads`` said. Built before the launch, in every process."""

    def __init__(self) -> None:
        self.threads = command_threads()

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        share_threads(self.threads, trainer.num_devices)


def mid_step(trainer: L.Trainer) -> bool:
    """Whether the batch just trained left its optimizer step to a later batch (accumulated
    batches); False outside fitting."""
    fitting = trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
    return fitting and trainer.fit_loop.epoch_loop._should_accumulate()


class StepRunProgressBar(RichProgressBar):
    """Lightning's Rich progress bar, whose description reads "Epoch 3" in a run counted in
    steps (``trainer.max_epochs`` -1), where Lightning's own reads "Epoch 3/-2"."""

    def _get_train_description(self, current_epoch: int) -> str:
        if self.trainer.max_epochs is None or self.trainer.max_epochs < 0:
            return f"Epoch {current_epoch}"
        return super()._get_train_description(current_epoch)


def progress_bars(
    kwargs: dict[str, Any], label: str, terminal_bar: ProgressBar | None = None
) -> list[Callback]:
    """The progress bar callback for a Trainer of ``kwargs`` (``trainer_kwargs``): none when
    the bar is off; where stderr is no terminal, ``PlainProgressBar`` (lines starting with
    ``label``); on a terminal ``terminal_bar``, else ``StepRunProgressBar`` (none when Rich
    is missing: Lightning then shows its tqdm bar, which prints no epoch total)."""
    if not kwargs.get("enable_progress_bar", True):
        return []
    if not is_terminal(sys.stderr):
        return [PlainProgressBar(label)]
    if terminal_bar is not None:
        return [terminal_bar]
    return [StepRunProgressBar()] if _RICH_AVAILABLE else []


class StepsDoneLogs:
    """A Lightning logger (mixed in before it) whose rows are at the optimizer steps done when
    each is logged (``trainer.global_step``: the N of ``best-stepN.ckpt`` and of ``genodiff
    info``'s step), with the epoch of the latest training batch (``trained_epoch``). Lightning
    logs the loss of step N and the validation after it at N - 1 (its count of batches that
    stepped, raised after their logging), and the learning rate that step N + 1 uses at N."""

    steps_of: L.Trainer | None = None  # the Trainer logging here; set by ``log_at_steps_done``

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        trainer = self.steps_of
        if trainer is not None:
            step = trainer.global_step
            if "epoch" in metrics:  # the epoch Lightning adds to each row
                metrics = {**metrics, "epoch": trained_epoch(trainer)}
        super().log_metrics(metrics, step)  # type: ignore[misc]


class StepsDoneCSVLogger(StepsDoneLogs, CSVLogger):
    """``metrics.csv`` with its ``step`` column counting the optimizer steps done."""


class StepsDoneTensorBoardLogger(StepsDoneLogs, TensorBoardLogger):
    """TensorBoard's step axis counting the optimizer steps done."""


def log_at_steps_done(trainer: L.Trainer) -> L.Trainer:
    """``trainer``, its ``StepsDoneLogs`` loggers told whose steps they log."""
    for logger in trainer.loggers:
        if isinstance(logger, StepsDoneLogs):
            logger.steps_of = trainer
    return trainer


def model_summaries(kwargs: dict[str, Any]) -> list[Callback]:
    """The model summary for a Trainer of ``kwargs`` (``trainer_kwargs``), which it turns
    Lightning's own off in: ``ModelSummaryWithoutFlops`` unless ``enable_model_summary`` is
    false (Lightning's would show a FLOPs count of 0 for every module)."""
    shown = kwargs.get("enable_model_summary", True) is not False
    kwargs["enable_model_summary"] = False
    return [ModelSummaryWithoutFlops()] if shown else []


def build_trainer(
    cfg: DictConfig,
    progress_bar: bool = True,
    monitor: str = "val/nelbo",
    mode: str = "min",
    label: str = "genodiff train",
) -> L.Trainer:
    """The run's Trainer: checkpoints (``LatestCheckpoint``, written atomically; the best by
    ``monitor``, lowest or highest as ``mode`` says), CSV and TensorBoard logs under
    ``output_dir`` (at the optimizer steps done: ``StepsDoneLogs``), SIGTERM and Ctrl-C
    stopping between steps (``StopBetweenSteps``); no progress bar when ``progress_bar`` is
    False (else as ``trainer.enable_progress_bar`` says; plain lines starting with ``label``
    where stderr is no terminal, ``progress_bars``); Lightning's model summary without the
    FLOPs it does not count (``model_summaries``)."""
    silence_lightning_notices()
    out = Path(cfg.output_dir)
    # One version_<n> folder per run, so a resumed run never overwrites earlier logs.
    loggers = [
        StepsDoneCSVLogger(out, name="logs"),
        StepsDoneTensorBoardLogger(out, name="tensorboard", default_hp_metric=False),
    ]
    kwargs = trainer_kwargs(cfg, progress_bar)
    summaries = model_summaries(kwargs)  # before kwargs reach the Trainer: it changes them
    trainer = L.Trainer(
        default_root_dir=out,
        logger=loggers,
        callbacks=[
            LatestCheckpoint(out / CHECKPOINT_FOLDER, monitor, mode),
            LearningRateMonitor(logging_interval="step"),
            StopBetweenSteps(),
            ShareThreads(),
            *progress_bars(kwargs, label),
            *summaries,
        ],
        plugins=[AtomicCheckpointIO()],
        **kwargs,
    )
    return log_at_steps_done(trainer)
